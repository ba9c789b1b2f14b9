"""Live transcription over a WebSocket (GET /v1/realtime): real Uvicorn on 127.0.0.1, the official
``openai`` client's realtime connection and a raw ``websockets`` client. Tiny random models: the words
are nonsense, the protocol and the limits are real."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import logging
import random
import threading
import time

import httpx
import numpy as np
import pytest
import websockets
from servers import serving
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.live.session import LOOKAHEAD_S
from speaker_transcripts.pipeline.audio import as_float32, decode_file
from speaker_transcripts.server.app import create_app
from speaker_transcripts.server.connection_guard import guarded_config

RATE = 24000
TRANSCRIPTION = {"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcm", "rate": RATE},
                                                              "transcription": {"model": "whisper-1", "language": "en"}}}}


@pytest.fixture(scope="module")
def pcm(speech_wav) -> bytes:
    """The speech clip twice with pauses, as 24-kHz 16-bit PCM: two turns, the quiet after the second
    long enough for its final text with a lookahead too (``LOOKAHEAD_S`` of what follows a stopped turn)."""
    import av

    speech = as_float32(decode_file(speech_wav).samples)
    quiet = np.zeros(16000 * 3 // 2, dtype=np.float32)
    samples = np.concatenate([quiet[:8000], speech, quiet, speech, quiet, np.zeros(int(16000 * LOOKAHEAD_S), dtype=np.float32)])
    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="flt", layout="mono")
    frame.sample_rate = 16000
    resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
    return b"".join(bytes(out.planes[0])[: out.samples * 2] for out in [*resampler.resample(frame), *resampler.resample(None)])


def appends(pcm: bytes, seconds: float = 0.1) -> list[str]:
    size = int(RATE * seconds) * 2
    return [base64.b64encode(pcm[start : start + size]).decode() for start in range(0, len(pcm), size)]


@pytest.fixture(scope="module")
def live_url(live_handler):
    # room for a session whose slot is still being given back when the next test's connects
    with serving(create_app(lambda: live_handler, ServerSettings(live_max_sessions=4, live_lookahead_s=LOOKAHEAD_S))) as base_url:
        yield base_url


def ws_url(base_url: str, query: str = "?intent=transcription") -> str:
    return base_url.replace("http://", "ws://") + "/v1/realtime" + query


async def send_clip(socket, pcm: bytes) -> None:
    """After the session's first event: the session set to transcribe, then ``pcm`` appended 0.1 s an event, at once."""
    await socket.recv()
    await socket.send(json.dumps({"type": "session.update", "session": TRANSCRIPTION}))
    for chunk in appends(pcm):
        await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))


async def events_until(socket, last_type: str, count: int = 1, guard_s: float = 120.0) -> list[dict]:
    """Events received until ``count`` of ``last_type`` came (the guard turns a hang into a failure)."""
    received: list[dict] = []
    try:
        async with asyncio.timeout(guard_s):
            while sum(event["type"] == last_type for event in received) < count:
                received.append(json.loads(await socket.recv()))
    except (TimeoutError, ConnectionClosed) as error:  # say what came before it ended
        raise AssertionError(f"{error!r} after {[(event['type'], event.get('error')) for event in received]}") from error
    return received


def test_the_openai_client_streams_a_conversation_and_gets_turns_words_and_speakers(live_url, pcm):
    from openai import AsyncOpenAI

    async def session() -> list:
        client = AsyncOpenAI(base_url=live_url + "/v1", api_key="unused")
        received = []
        async with client.realtime.connect(extra_query={"intent": "transcription"}) as connection:
            await connection.session.update(session=TRANSCRIPTION)
            for chunk in appends(pcm):
                await connection.input_audio_buffer.append(audio=chunk)
            async with asyncio.timeout(120):
                async for event in connection:
                    received.append(event)
                    if sum(e.type == "conversation.item.input_audio_transcription.completed" for e in received) == 2:
                        break
        return received

    events = asyncio.run(session())
    kinds = [event.type for event in events]
    assert kinds[:2] == ["session.created", "session.updated"]
    assert events[1].session.audio.input.transcription.language == "en"
    for item in dict.fromkeys(event.item_id for event in events if getattr(event, "item_id", None)):
        of_item = [event for event in events if getattr(event, "item_id", None) == item]
        order = [event.type.rsplit(".", 1)[-1] for event in of_item]
        assert order[0] == "speech_started" and order[-1] == "completed"
        assert order.index("speech_stopped") < order.index("committed") < order.index("completed")
        completed = of_item[-1]
        assert all(event.delta.strip() for event in of_item if event.type.endswith(".delta"))
        segments = [event for event in of_item if event.type.endswith(".segment")]
        assert segments and all(segment.speaker and segment.start <= segment.end for segment in segments)
        # the final text, with its speakers (a segment may begin inside what Whisper spelled as one
        # word, as the random test model's pieces do, so spacing at the seams is not compared)
        assert "".join("".join(segment.text for segment in segments).split()) == "".join(completed.transcript.split())
        assert completed.usage.type == "duration" and completed.usage.seconds > 0


def test_a_commit_with_nothing_new_still_finishes_the_turn_waiting_for_what_follows_it(live_handler, pcm):
    """With ``LIVE_LOOKAHEAD_S`` longer than the quiet after the last turn, that turn is still waiting for its
    final decode when the client commits at its end (as the page and ``live --url`` do): the commit has nothing
    new (OpenAI's error) but the turn's segments and ``completed`` come first, so such a client has every turn."""
    settings = ServerSettings(live_lookahead_s=10)
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:
        async def scenario() -> list[dict]:
            async with connect(ws_url(base_url)) as socket:
                await send_clip(socket, pcm)
                await socket.send(json.dumps({"type": "input_audio_buffer.commit", "event_id": "last"}))
                return await events_until(socket, "error")

        events = asyncio.run(scenario())
    stopped = [event["item_id"] for event in events if event["type"] == "input_audio_buffer.speech_stopped"]
    completed = [event["item_id"] for event in events if event["type"] == "conversation.item.input_audio_transcription.completed"]
    assert len(stopped) == 2 and completed == stopped  # the second one's completed came with the commit, before its error
    assert events[-1]["error"]["code"] == "invalid_value" and events[-1]["error"]["event_id"] == "last"


def test_beside_another_session_each_turn_is_final_when_it_stops_whatever_the_lookahead(live_handler, pcm):
    """``LIVE_LOOKAHEAD_S`` is for a session alone on the server: beside another open session (idle here) each
    turn is decoded for its final text when it stops, so both turns complete without 10 s of audio after the
    last one (alone, the last one waits for it or a commit: the test above). The audio is paced (5x real time)
    so that the session is not behind: a session behind decodes its turns at once, alone or not."""
    settings = ServerSettings(live_lookahead_s=10, live_max_sessions=2)
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:
        async def scenario() -> list[dict]:
            async with connect(ws_url(base_url)) as other, connect(ws_url(base_url)) as socket:
                await other.recv()
                await socket.recv()
                await socket.send(json.dumps({"type": "session.update", "session": TRANSCRIPTION}))
                for chunk in appends(pcm):
                    await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
                    await asyncio.sleep(0.02)
                return await events_until(socket, "conversation.item.input_audio_transcription.completed", count=2)

        events = asyncio.run(scenario())
    stopped = [event["item_id"] for event in events if event["type"] == "input_audio_buffer.speech_stopped"]
    completed = [event["item_id"] for event in events if event["type"] == "conversation.item.input_audio_transcription.completed"]
    assert len(stopped) == 2 and completed == stopped and not any(event["type"] == "error" for event in events)


def test_a_raw_websocket_client_with_the_beta_events_and_manual_commits(live_url, pcm):
    async def session() -> tuple[list, list]:
        async with connect(ws_url(live_url), additional_headers={"OpenAI-Beta": "realtime=v1"}) as socket:
            created = json.loads(await socket.recv())
            await socket.send(json.dumps({"type": "transcription_session.update", "session": {
                "input_audio_format": "pcm16", "input_audio_transcription": {"model": "whisper-1", "language": "en"},
                "turn_detection": None}}))
            updated = json.loads(await socket.recv())
            for chunk in appends(pcm[: RATE * 2 * 4]):
                await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
            await socket.send(json.dumps({"type": "input_audio_buffer.commit", "event_id": "mine"}))
            first = await events_until(socket, "conversation.item.input_audio_transcription.completed")
            await socket.send(json.dumps({"type": "input_audio_buffer.commit", "event_id": "again"}))
            second = await events_until(socket, "error")
            return [created, updated], first + second

    (created, updated), events = asyncio.run(session())
    assert created["type"] == "transcription_session.created" and updated["type"] == "transcription_session.updated"
    assert updated["session"]["turn_detection"] is None and updated["session"]["input_audio_format"] == "pcm16"
    kinds = [event["type"] for event in events]
    assert "input_audio_buffer.speech_started" not in kinds  # no turn detection: the client decides
    assert kinds.index("input_audio_buffer.committed") < kinds.index("conversation.item.input_audio_transcription.completed")
    assert events[-1]["error"]["event_id"] == "again" and "nothing to commit" in events[-1]["error"]["message"]
    assert all(event["event_id"].startswith("event_") for event in events)


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "invalid_json"),
        (json.dumps([1, 2]), "invalid_event"),
        (json.dumps({"type": "response.create"}), "unknown_event_type"),
        (json.dumps({"type": "input_audio_buffer.append", "audio": "%%%"}), "invalid_audio"),
        (json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\0" * 3).decode()}), "invalid_audio"),
        (json.dumps({"type": "session.update", "session": {"type": "realtime"}}), "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcmu"}}}}}),
         "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 44100}}}}}),
         "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"transcription": {"language": "xx"}}}}}), "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"turn_detection": {"silence_duration_ms": -5}}}}}),
         "invalid_value"),
        (json.dumps({"type": "input_audio_buffer.commit"}), "invalid_value"),
        ("[" * 200_000, "invalid_json"),  # nested too deep for the parser: an error event, not a dropped connection
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"transcription": {"model": "whisper\r\n1"}}}}}),
         "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"transcription": {"model": "m" * 900_000}}}}}),
         "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000.0}}}}}),
         "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"transcription": {"diarize": "yes"}}}}}), "invalid_value"),
        (json.dumps({"type": "session.update", "session": {"audio": {"input": {"transcription": {"prompt": "p" * 900_000}}}}}),
         "invalid_value"),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else None,
)
def test_a_bad_event_gets_an_error_event_and_the_session_goes_on(live_url, pcm, frame, code):
    async def session() -> tuple[dict, dict]:
        async with connect(ws_url(live_url)) as socket:
            await socket.recv()  # session.created
            await socket.send(frame)
            error = json.loads(await socket.recv())
            await socket.send(json.dumps({"type": "session.update", "session": TRANSCRIPTION}))
            return error, json.loads(await socket.recv())

    error, after = asyncio.run(session())
    assert error["type"] == "error" and error["error"]["code"] == code, error
    assert "Traceback" not in error["error"]["message"] and len(error["error"]["message"]) < 400
    assert after["type"] == "session.updated"


@pytest.fixture(scope="module")
def keyed_url(live_handler):
    with serving(create_app(lambda: live_handler, ServerSettings(api_key="sk-live-test", live_max_sessions=4))) as base_url:
        yield base_url


def test_the_key_comes_in_the_authorization_header_or_the_browser_subprotocol_never_the_query(keyed_url):
    async def attempt(**options) -> str:
        query = options.pop("query", "?intent=transcription")
        try:
            async with connect(ws_url(keyed_url, query), **options) as socket:
                event = json.loads(await socket.recv())
                return f"{event['type']} {socket.subprotocol}"
        except websockets.exceptions.InvalidStatus as refused:
            return str(refused.response.status_code)

    async def all_attempts() -> list[str]:
        return [
            await attempt(),
            await attempt(additional_headers={"Authorization": "Bearer wrong"}),
            await attempt(query="?intent=transcription&api_key=sk-live-test"),
            await attempt(additional_headers={"Authorization": "Bearer sk-live-test"}),
            await attempt(subprotocols=["realtime", "openai-insecure-api-key.sk-live-test"]),
            await attempt(subprotocols=["realtime", "openai-insecure-api-key.wrong"]),
        ]

    assert asyncio.run(all_attempts()) == ["401", "401", "401", "session.created None", "session.created realtime", "401"]


@pytest.mark.parametrize(("fast_encoder", "second", "lookahead_s"), [(True, "session.created", 3.0), (False, "error", 0.0)])
def test_a_server_left_to_choose_takes_what_its_whisper_encoder_affords(live_handler, monkeypatch, fast_encoder, second, lookahead_s):
    """LIVE_MAX_SESSIONS and LIVE_LOOKAHEAD_S unset: two sessions and the lookahead where Whisper's encoder is
    fast (a GPU, native bfloat16), one session without on a CPU without (live.capacity; an AVX2-only CPU)."""
    from dataclasses import replace

    from speaker_transcripts.pipeline.transcriber import Transcriber

    measured = live_handler.capabilities
    monkeypatch.setattr(Transcriber, "capabilities", property(lambda self: replace(measured, fast_encoder=fast_encoder)))
    app = create_app(lambda: live_handler, ServerSettings())
    with serving(app) as base_url:
        async def two_sessions() -> str:
            async with connect(ws_url(base_url)) as first:
                assert json.loads(await first.recv())["type"] == "session.created"
                async with connect(ws_url(base_url)) as other:
                    return json.loads(await other.recv())["type"]

        assert asyncio.run(two_sessions()) == second
        assert app.state.live.lookahead_s == lookahead_s


def test_sessions_beyond_the_cap_are_refused_and_a_vanished_client_frees_its_slot_at_once(live_handler, pcm):
    settings = ServerSettings(live_max_sessions=1)
    with serving(create_app(lambda: live_handler, settings)) as base_url:
        def open_sessions() -> float:
            metrics = httpx.get(base_url + "/metrics", timeout=30).text
            return float(next(line.split()[-1] for line in metrics.splitlines() if line.startswith("speaker_transcripts_live_sessions ")))

        async def scenario() -> tuple[dict, int, str]:
            first = await connect(ws_url(base_url))
            await first.recv()
            for chunk in appends(pcm[: RATE * 2]):
                await first.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
            async with connect(ws_url(base_url)) as second:
                refusal = json.loads(await second.recv())
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    await second.recv()
            first.transport.abort()  # the client vanishes mid-session, without a close handshake
            await asyncio.to_thread(wait_until, lambda: open_sessions() == 0)
            async with connect(ws_url(base_url)) as third:
                accepted = json.loads(await third.recv())["type"]
            return refusal, closed.value.rcvd.code, accepted

        refusal, code, accepted = asyncio.run(scenario())
    assert refusal["error"]["code"] == "server_busy" and "LIVE_MAX_SESSIONS" in refusal["error"]["message"]
    assert code == 1013 and accepted == "session.created"


def test_a_client_that_leaves_during_a_step_leaves_no_error_unretrieved(live_handler, pcm, monkeypatch):
    """The session's thread ends the step it was in when its client left (``RequestAbandoned``); that ending
    is taken, not left to asyncio to log as "Future exception was never retrieved" with a traceback."""
    import gc
    import logging
    import threading

    from speaker_transcripts.errors import RequestAbandoned
    from speaker_transcripts.live.session import LiveSession

    entered = threading.Event()

    def step_until_the_client_left(self, samples):  # a decode that notices the client left at its next step
        entered.set()
        deadline = time.monotonic() + 120  # a failure guard only
        while not self.should_stop():
            assert time.monotonic() < deadline, "the session never learned its client left"
            time.sleep(0.02)
        raise RequestAbandoned("the client left")

    monkeypatch.setattr(LiveSession, "append", step_until_the_client_left)
    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    logging.getLogger("asyncio").addHandler(handler)
    try:
        with serving(create_app(lambda: live_handler, ServerSettings(live_max_sessions=1))) as base_url:
            async def scenario() -> str:
                leaving = await connect(ws_url(base_url))
                await leaving.recv()
                await leaving.send(json.dumps({"type": "input_audio_buffer.append", "audio": appends(pcm)[0]}))
                await asyncio.to_thread(entered.wait, 120)
                leaving.transport.abort()  # while the step runs: it ends with RequestAbandoned
                async with asyncio.timeout(120):  # the slot frees once the step has ended
                    while True:
                        async with connect(ws_url(base_url)) as next_client:
                            first = json.loads(await next_client.recv())
                        if first["type"] == "session.created":
                            return first["type"]
                        await asyncio.sleep(0.1)

            assert asyncio.run(scenario()) == "session.created"
            gc.collect()  # an unretrieved exception is logged when its future is collected
    finally:
        logging.getLogger("asyncio").removeHandler(handler)
    assert not [message for message in logged if "never retrieved" in message], logged


def wait_until(condition, guard_s: float = 120.0) -> None:
    deadline = time.monotonic() + guard_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def test_an_idle_session_is_told_and_closed(live_handler):
    with serving(create_app(lambda: live_handler, ServerSettings(live_idle_timeout_s=0.5))) as base_url:
        async def scenario() -> tuple[dict, int]:
            async with connect(ws_url(base_url)) as idle:
                await idle.recv()
                said = json.loads(await idle.recv())
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    await idle.recv()
            return said, closed.value.rcvd.code

        said, code = asyncio.run(scenario())
    assert said["error"]["code"] == "session_idle" and "LIVE_IDLE_TIMEOUT_S" in said["error"]["message"] and code == 1000


def test_a_frame_over_the_limit_closes_only_its_own_session(live_handler):
    settings = ServerSettings(live_max_frame_kb=16, live_max_sessions=2)
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:  # the frame limit is Uvicorn's
        async def scenario() -> tuple[int, str]:
            async with connect(ws_url(base_url)) as bystander, connect(ws_url(base_url)) as abusive:
                await bystander.recv()
                await abusive.recv()
                await abusive.send(json.dumps({"type": "input_audio_buffer.append", "audio": "A" * 20_000}))
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    await abusive.recv()
                await bystander.send(json.dumps({"type": "session.update", "session": TRANSCRIPTION}))
                return closed.value.rcvd.code, json.loads(await bystander.recv())["type"]

        code, still = asyncio.run(scenario())
    assert code == 1009 and still == "session.updated"


def test_a_session_ends_at_its_time_limit_with_its_open_turn_finished(live_handler, pcm):
    settings = ServerSettings(live_max_session_s=3.0)
    with serving(create_app(lambda: live_handler, settings)) as base_url:
        async def scenario() -> list[dict]:
            async with connect(ws_url(base_url)) as socket:
                await socket.recv()
                await socket.send(json.dumps({"type": "session.update", "session": {
                    "audio": {"input": {"turn_detection": None, "transcription": {"language": "en"}}}}}))
                for chunk in appends(pcm[: RATE * 2 * 3]):
                    await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
                received = []
                with pytest.raises(websockets.exceptions.ConnectionClosedOK):
                    async with asyncio.timeout(120):
                        while True:
                            received.append(json.loads(await socket.recv()))
                return received

        events = asyncio.run(scenario())
    kinds = [event["type"] for event in events]
    expired = kinds.index("error")
    assert events[expired]["error"]["code"] == "session_expired"
    assert "conversation.item.input_audio_transcription.completed" in kinds[expired:]  # what was sent is transcribed


def test_events_take_effect_in_the_order_sent_audio_right_after_an_update_is_read_at_its_rate(live_url, pcm):
    """A client that sends 16-kHz audio right after the session.update that declares it, without waiting
    for session.updated: the audio was read at the old 24-kHz rate (times 2/3 of the truth)."""
    import av

    frame = av.AudioFrame.from_ndarray(np.frombuffer(pcm, "<i2").reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = RATE
    resampler = av.AudioResampler(format="s16", layout="mono", rate=16000)
    pcm16 = b"".join(bytes(out.planes[0])[: out.samples * 2] for out in [*resampler.resample(frame), *resampler.resample(None)])
    seconds = 4.0
    chunk = 3200  # 0.1 s at 16 kHz

    async def session() -> list[dict]:
        async with connect(ws_url(live_url)) as socket:
            await socket.recv()
            await socket.send(json.dumps({"type": "session.update", "session": {"audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 16000}, "turn_detection": None, "transcription": {"language": "en"}}}}}))
            for start in range(0, int(16000 * seconds) * 2, chunk):
                await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm16[start : start + chunk]).decode()}))
            await socket.send(json.dumps({"type": "input_audio_buffer.commit"}))
            return await events_until(socket, "conversation.item.input_audio_transcription.completed")

    events = asyncio.run(session())
    # on a busy machine the session may report its backlog first (seen in CI beside four busy processes)
    answers = [event for event in events if event["type"] != "session.backlog"]
    assert answers[0]["type"] == "session.updated" and answers[0]["session"]["audio"]["input"]["format"]["rate"] == 16000
    assert events[-1]["usage"]["seconds"] == pytest.approx(seconds, abs=0.05)


def test_a_new_session_right_after_the_last_one_closed_is_served(live_handler, pcm):
    """One slot: each session closes (the client's close, then the server's at the end of a time limit)
    and the next connects at once; none is refused as server_busy."""
    settings = ServerSettings(live_max_sessions=1)
    with serving(create_app(lambda: live_handler, settings)) as base_url:
        async def scenario() -> list[str]:
            kinds = []
            for _ in range(4):
                async with connect(ws_url(base_url)) as socket:
                    kinds.append(json.loads(await socket.recv())["type"])
                    await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": appends(pcm)[10]}))
            return kinds

        assert asyncio.run(scenario()) == ["session.created"] * 4


def test_a_new_session_waits_for_an_ending_sessions_slow_last_step(live_handler, pcm):
    """One slot; the first session's client leaves while its thread is in a step that takes longer than
    ``SLOT_WAIT_S`` (a busy machine: held here until 5 s after the client left). The next session waits
    for that step to end instead of being refused as server_busy."""
    import threading

    from speaker_transcripts.server.routers import realtime as route

    release = threading.Event()

    class SlowStream:
        def __init__(self, stream):
            self.stream = stream

        def probabilities(self, samples):
            release.wait(120)  # a failure guard only
            return self.stream.probabilities(samples)

    class SlowGate:
        def __getattr__(self, name):
            return getattr(live_handler.speech_gate, name)

        def stream(self):
            return SlowStream(live_handler.speech_gate.stream())

    class Busy:
        speech_gate = SlowGate()

        def __getattr__(self, name):
            return getattr(live_handler, name)

    settings = ServerSettings(live_max_sessions=1)
    with serving(create_app(lambda: Busy(), settings)) as base_url:
        async def scenario() -> str:
            async with connect(ws_url(base_url)) as socket:
                await socket.recv()
                await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": appends(pcm)[10]}))
            threading.Timer(route.SLOT_WAIT_S + 2.0, release.set).start()  # the step outlasts the short wait
            async with connect(ws_url(base_url)) as socket:
                return json.loads(await socket.recv())["type"]

        assert asyncio.run(scenario()) == "session.created"
    assert release.is_set()


def test_frames_without_audio_do_not_keep_a_session_alive(live_handler):
    """A client that sends a malformed frame (or a useless event) now and then held the only slot for
    LIVE_MAX_SESSION_S: only audio counts as activity."""
    with serving(create_app(lambda: live_handler, ServerSettings(live_idle_timeout_s=1.0))) as base_url:
        async def scenario() -> tuple[list[str], int]:
            async with connect(ws_url(base_url)) as socket:
                await socket.recv()
                codes = []

                def note(message: str) -> None:
                    event = json.loads(message)
                    codes.append(event.get("error", {}).get("code") or event["type"])

                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    async with asyncio.timeout(120):
                        while True:
                            await socket.send(random.choice(["x", json.dumps({"type": "input_audio_buffer.clear"})]))
                            with contextlib.suppress(TimeoutError):
                                async with asyncio.timeout(0.3):
                                    note(await socket.recv())
                # A send can meet the close before the events sent ahead of it are read (a busy machine): read them.
                with contextlib.suppress(websockets.exceptions.ConnectionClosed):
                    while True:
                        note(await socket.recv())
            return codes, closed.value.rcvd.code

        codes, code = asyncio.run(scenario())
    assert "session_idle" in codes and code == 1000


def test_pending_events_are_bounded_the_reader_waits_and_nothing_is_lost(live_handler, speech_wav):
    """session.update frames of 600 kB each, sent while the session's thread is busy (here: embedding a
    known speaker's clip, held): the server reads at most a few of them, so the client's sends wait in
    TCP instead of piling up in the server's memory; once the thread goes on, every one is answered."""
    import threading

    release = threading.Event()

    class Held:
        def __getattr__(self, name):
            return getattr(live_handler, name)

        def voice_embeddings(self, speakers):
            release.wait(120)
            return {}

    clip = base64.b64encode(speech_wav).decode()
    FRAMES = 120
    frame = json.dumps({"type": "session.update", "session": {"audio": {"input": {"transcription": {"prompt": "p" * 600_000}}}}})
    with serving(create_app(lambda: Held(), ServerSettings(live_max_frame_kb=1024))) as base_url:
        async def scenario() -> tuple[bool, list[str]]:
            async with connect(ws_url(base_url), max_size=None, compression=None) as socket:  # 72 MB on the wire, not deflated
                await socket.recv()
                await socket.send(json.dumps({"type": "session.update", "session": {"audio": {"input": {"transcription": {
                    "known_speakers": [{"name": "Ann", "audio": clip}]}}}}}))

                async def flood() -> None:
                    for _ in range(FRAMES):  # 72 MB: beyond what loopback's socket buffers hold (autotuned up to 32 + 4 MB)
                        await socket.send(frame)

                sending = asyncio.ensure_future(flood())
                done, _ = await asyncio.wait({sending}, timeout=10)  # a server reading all of it takes well under a second
                blocked = sending not in done
                release.set()
                await asyncio.wait_for(sending, 120)
                answered = [event["type"] for event in await events_until(socket, "error", count=FRAMES)]
                return blocked, answered

        blocked, answered = asyncio.run(scenario())
    assert blocked, "the server read every frame while its session could not keep up"
    assert answered.count("error") == FRAMES  # each over-long prompt refused, in order, none dropped


def test_a_fast_client_that_answers_pings_is_slowed_not_dropped(live_handler, pcm):
    """Audio sent as fast as the socket takes it, a 0.5-s backlog bound, the server's keepalive pings
    every 0.2 s: the reader stops reading, the client's pongs wait in TCP behind its audio, and the
    session must still finish every turn (a late pong closed it with 1011 after 40 s before: Uvicorn's
    20-s ping timeout; no ping times out now). The client here sends no pings of its own: one that
    does is answered only once the server reads that far (docs/live.md)."""
    settings = ServerSettings(live_max_backlog_s=0.5)
    with serving(create_app(lambda: live_handler, settings), settings, ws_ping_interval=0.2) as base_url:
        assert guarded_config(create_app(lambda: live_handler, settings), settings).ws_ping_timeout is None
        async def scenario() -> list[dict]:
            async with connect(ws_url(base_url), ping_interval=None) as socket:
                await socket.recv()
                await socket.send(json.dumps({"type": "session.update", "session": TRANSCRIPTION}))
                for _ in range(2):
                    for chunk in appends(pcm, seconds=0.5):
                        await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
                return await events_until(socket, "conversation.item.input_audio_transcription.completed", count=4, guard_s=300)

        events = asyncio.run(scenario())
    assert sum(event["type"] == "conversation.item.input_audio_transcription.completed" for event in events) == 4


def test_a_key_in_the_websocket_url_is_refused_and_never_logged(keyed_url):
    import logging

    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    collect = Collect()
    logs = [logging.getLogger("uvicorn.error"), logging.getLogger("uvicorn.access")]
    levels = [log.level for log in logs]
    for log in logs:
        log.addHandler(collect)
        log.setLevel(logging.INFO)

    async def attempts() -> list[int]:
        codes = []
        for query in ("?intent=transcription&api_key=sk-live-test", "?intent=transcription&key=sk-live-test",
                      "?intent=transcription&api_key=sk-typo-of-it"):
            with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
                async with connect(ws_url(keyed_url, query)):
                    pass
            codes.append(refused.value.response.status_code)
        return codes

    try:
        codes = asyncio.run(attempts())
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.removeHandler(collect)
            log.setLevel(level)
    assert codes == [401, 401, 401]
    logged = "\n".join(records)
    assert "/v1/realtime" in logged and "api_key=***" in logged
    assert "sk-live-test" not in logged and "sk-typo-of-it" not in logged


def held_at_each_decode(live_handler, release: threading.Event):
    """``live_handler`` whose decodes wait for ``release``: a machine busy elsewhere, as a session sees it."""

    class HeldRecognizer:
        def __getattr__(self, name):
            return getattr(live_handler.recognizer, name)

        def transcribe(self, *args, **kwargs):
            release.wait(120)  # a failure guard only
            return live_handler.recognizer.transcribe(*args, **kwargs)

    class Busy:
        recognizer = HeldRecognizer()

        def __getattr__(self, name):
            return getattr(live_handler, name)

    return Busy()


def test_a_session_that_falls_behind_says_so_and_says_when_it_caught_up(live_handler, pcm):
    """The session's first decode is held (a machine busy elsewhere) while the client sends nine seconds
    of audio: the client is told the session is behind and by how much; once the decode goes on, every
    turn completes and the client is told the session caught up."""
    release = threading.Event()
    busy = held_at_each_decode(live_handler, release)

    with serving(create_app(lambda: busy)) as base_url:
        async def scenario() -> tuple[dict, list[dict]]:
            async with connect(ws_url(base_url)) as socket:
                await send_clip(socket, pcm)
                behind = (await events_until(socket, "session.backlog"))[-1]
                release.set()
                later = await events_until(socket, "conversation.item.input_audio_transcription.completed", count=2)
                if not any(event["type"] == "session.backlog" and not event["behind"] for event in later):
                    later += await events_until(socket, "session.backlog")
                return behind, later

        behind, later = asyncio.run(scenario())
    assert behind["behind"] is True and behind["seconds"] >= 4.0
    reports = [event for event in later if event["type"] == "session.backlog"]
    assert reports[-1]["behind"] is False and reports[-1]["seconds"] < 1.5
    assert sum(event["type"] == "conversation.item.input_audio_transcription.completed" for event in later) == 2


def text_only(diarize: bool) -> dict:
    """``TRANSCRIPTION`` with speakers on or off."""
    return {**TRANSCRIPTION, "audio": {"input": {**TRANSCRIPTION["audio"]["input"],
                                                 "transcription": {"model": "whisper-1", "language": "en", "diarize": diarize}}}}


def test_sessions_are_admitted_by_cost_three_text_only_where_two_with_speakers_fit(live_handler, pcm):
    """``LIVE_MAX_SESSIONS=2`` (what a fast encoder chooses): three text-only sessions run at once; beside two
    sessions with speakers a third is refused at once, and beside two text-only ones a third that asks for
    speakers is refused with its first audio, both with ``server_busy`` and close code 1013."""
    settings = ServerSettings(live_max_sessions=2)
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:
        async def opened(diarize: bool) -> tuple[object, dict, dict | None]:
            """A session that sends its first audio and a commit, once the server took it: the server's first
            event, and its answer to the commit (an error: the audio is quiet) once the audio was worked on."""
            socket = await connect(ws_url(base_url))
            first = json.loads(await socket.recv())
            answer = None
            if first["type"] == "session.created":
                await socket.send(json.dumps({"type": "session.update", "session": text_only(diarize)}))
                await events_until(socket, "session.updated")
                await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": appends(pcm[: RATE * 2])[0]}))
                await socket.send(json.dumps({"type": "input_audio_buffer.commit"}))
                answer = (await events_until(socket, "error"))[-1]
            return socket, first, answer

        async def close_code(socket) -> int:
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await socket.recv()
            return closed.value.rcvd.code

        async def scenario() -> tuple[list, dict, int, dict, int]:
            text = [await opened(diarize=False) for _ in range(3)]
            accepted = [(first["type"], answer["error"]["code"]) for _, first, answer in text]
            for socket, _, _ in text[2:]:
                await socket.close()
            late, _, late_refusal = await opened(diarize=True)  # two text-only and one with speakers do not fit
            late_code = await close_code(late)
            for socket, _, _ in text[:2]:
                await socket.close()
            speakers = [await opened(diarize=True) for _ in range(2)]
            third, refusal, _ = await opened(diarize=True)
            code = await close_code(third)
            for socket, _, _ in speakers:
                await socket.close()
            return accepted, late_refusal, late_code, refusal, code

        kinds, late_refusal, late_code, refusal, code = asyncio.run(scenario())
    assert kinds == [("session.created", "invalid_value")] * 3  # taken, and the audio worked on (nothing to commit)
    assert late_refusal["error"]["code"] == refusal["error"]["code"] == "server_busy" and late_code == code == 1013


def test_speakers_are_numbered_in_order_of_appearance_with_no_gaps(live_handler, pcm, monkeypatch):
    """The live clustering may found a speaker who never labels a word (a voice heard too briefly): the labels a
    client sees are numbered by the order their words came, so two people are SPEAKER_00 and SPEAKER_01."""
    from speaker_transcripts.live import session as live

    # the clustering's labels: the first turn (0.5-3.3 s) by its fourth speaker, the second (4.8-7.6 s) by its second
    monkeypatch.setattr(live, "word_speakers", lambda words, turns: ["SPEAKER_03" if word.start < 4.0 else "SPEAKER_01" for word in words])
    settings = ServerSettings(live_max_sessions=1)
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:
        async def scenario() -> list[dict]:
            async with connect(ws_url(base_url)) as socket:
                await send_clip(socket, pcm)
                await socket.send(json.dumps({"type": "input_audio_buffer.commit"}))
                return await events_until(socket, "conversation.item.input_audio_transcription.completed", count=2)

        events = asyncio.run(scenario())
    speakers = [event["speaker"] for event in events if event["type"] == "conversation.item.input_audio_transcription.segment"]
    assert list(dict.fromkeys(speakers)) == ["SPEAKER_00", "SPEAKER_01"]


def words_every(step_s: float, past_end_s: float = 0.0):
    """A stand-in for Whisper's decode: a word every ``step_s`` of the buffer and a sentence end every ten words;
    a final decode's words run ``past_end_s`` beyond the audio it heard (as cross-attention times do at a seam)."""
    from speaker_transcripts.live.session import LiveSession
    from speaker_transcripts.pipeline.transcript import Chunk

    def decode(self, start, end, final, window_s=None, prefix=""):
        shift = past_end_s if final else 0.0
        times = np.arange(start / 16000, end / 16000 - 0.25, step_s)
        return [Chunk(f" word{index}{'.' if index % 10 == 9 else ''}", at + shift, at + 0.25 + shift) for index, at in enumerate(times)]

    return LiveSession, "_decode", decode


def test_a_turn_without_pauses_gets_labelled_segments_before_it_ends(live_handler, speech_wav, monkeypatch):
    """14 s of speech the client commits as one turn (no pause ends it; under the 15-s buffer that was once the
    first place it was cut): its first sentences come with their speakers while it is still being spoken. The
    client sends a second of audio at a time and waits for the words it brings, so the session steps through it
    as it would in real time, however busy the machine; the diarizer is stood in for by one speaker's timeline,
    final up to ``latency_s`` before the audio heard (the tiny random embedding model takes seconds a window), its
    steps done at once."""
    from concurrent.futures import Future

    from speaker_transcripts.live.speakers import LiveDiarizer
    from speaker_transcripts.pipeline.diarization import Turn

    def advance(self, read, available, final=False):
        until = available / 16000 - (0.0 if final else self.settings.latency_s)
        if until > self.horizon:
            self.turns, self.horizon = [Turn("SPEAKER_07", 0.0, until)], until
        return []

    class AtOnce:  # the stand-in's steps done before the session looks at the timeline, however busy the machine
        def submit(self, function, *args):
            done = Future()
            done.set_result(function(*args))
            return done

    monkeypatch.setattr(LiveDiarizer, "advance", advance)
    monkeypatch.setattr(type(live_handler), "beside", property(lambda self: AtOnce()))
    monkeypatch.setattr(*words_every(0.3))
    speech = as_float32(decode_file(speech_wav).samples)
    samples = np.tile(speech, 6)[: 14 * 16000]
    pcm16 = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    turn = {**TRANSCRIPTION, "audio": {"input": {**TRANSCRIPTION["audio"]["input"], "format": {"type": "audio/pcm", "rate": 16000},
                                                 "turn_detection": None}}}
    settings = ServerSettings(live_max_sessions=1)
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:
        async def scenario() -> list[dict]:
            received: list[dict] = []
            async with connect(ws_url(base_url)) as socket:
                await socket.recv()
                await socket.send(json.dumps({"type": "session.update", "session": turn}))
                received += await events_until(socket, "session.updated")
                second = 16000 * 2
                for start in range(0, len(pcm16), second):
                    for piece in range(start, min(start + second, len(pcm16)), second // 10):
                        chunk = base64.b64encode(pcm16[piece : min(piece + second // 10, start + second)]).decode()
                        await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
                    received += await events_until(socket, "conversation.item.input_audio_transcription.delta")
                await socket.send(json.dumps({"type": "input_audio_buffer.commit"}))
                return received + await events_until(socket, "conversation.item.input_audio_transcription.completed")

        events = asyncio.run(scenario())
    kinds = [event["type"] for event in events]
    before_the_end = [event for event in events[: kinds.index("input_audio_buffer.committed")]
                      if event["type"] == "conversation.item.input_audio_transcription.segment"]
    assert before_the_end and all(event["speaker"] == "SPEAKER_00" for event in before_the_end)
    assert before_the_end[0]["end"] < 14.0 - 5.0  # a sentence said well before the end, not the turn's last words


def test_live_subtitles_have_no_overlapping_cues(live_handler, tmp_path, monkeypatch):
    """``live --url ... --out x.srt``: separate final decodes meet at the seams of turns and cuts, and a decode's
    last word may be timed past the audio it heard; the cues still follow one another, each starting after the
    one before ends, and a sentence starts with a capital, as the file path's subtitles do."""
    from speaker_transcripts.cli import live as live_cli

    monkeypatch.setattr(*words_every(0.3, past_end_s=0.4))
    settings = ServerSettings(live_max_sessions=1)
    out = tmp_path / "session.srt"
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:
        assert live_cli.main(["samples/two-readers.wav", "--speed", "50", "--url", base_url, "--out", str(out), "--language", "en"]) == 0
    blocks = [block.splitlines() for block in out.read_text().strip().split("\n\n")]
    assert len(blocks) > 2
    times = [[srt_seconds(stamp) for stamp in block[1].split(" --> ")] for block in blocks]
    assert all(start < end for start, end in times)
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(times))
    assert all(block[2].split(": ", 1)[-1][:1].isupper() for block in blocks[:1])


def srt_seconds(stamp: str) -> float:
    hours, minutes, seconds = stamp.replace(",", ".").split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def test_a_refused_rate_change_leaves_the_backlog_counted_at_the_sessions_rate(live_handler, pcm):
    """A ``session.update`` that asks for another audio rate after audio was sent is refused, and the
    audio after it is still counted in seconds at the session's rate: the reader used to take the new
    rate anyway, so the backlog bound (``LIVE_MAX_BACKLOG_S``) and the reports were 1.5x off."""
    release = threading.Event()
    busy = held_at_each_decode(live_handler, release)

    slower = json.loads(json.dumps(TRANSCRIPTION))
    slower["audio"]["input"]["format"]["rate"] = 16000
    with serving(create_app(lambda: busy)) as base_url:
        async def scenario() -> list[dict]:
            async with connect(ws_url(base_url)) as socket:
                await socket.recv()
                await socket.send(json.dumps({"type": "session.update", "session": TRANSCRIPTION}))
                chunks = appends(pcm)
                await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunks[0]}))
                await socket.send(json.dumps({"type": "session.update", "session": slower}))
                for chunk in chunks[1:]:
                    await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
                await socket.send(json.dumps({"type": "no.such.event"}))  # answered by the reader once it read all the audio
                events: list[dict] = []
                while not {"unknown", "format"} <= {error_kind(event) for event in events}:  # the refusal may come first or later
                    if any(error_kind(event) == "unknown" for event in events):
                        release.set()  # every append is read: let the session work on to reach the update
                    events += await events_until(socket, "error")
                release.set()
                return events

        events = asyncio.run(scenario())
    read = events[: next(index for index, event in enumerate(events) if error_kind(event) == "unknown")]
    reports = [event["seconds"] for event in read if event["type"] == "session.backlog"]
    sent_s = len(pcm) / 2 / RATE
    assert reports and max(reports) <= sent_s + 0.2, (reports, sent_s)


def error_kind(event: dict) -> str | None:
    """Which of the two refusals above an event is: the unknown event type, or the rate change."""
    if event["type"] != "error":
        return None
    text = json.dumps(event["error"])
    return "unknown" if "no.such.event" in text else "format" if "format" in text else "other"


def test_a_frame_that_is_not_utf8_closes_the_session_with_1007_and_no_traceback(live_url):
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    collect = Collect()
    logs = [logging.getLogger(name) for name in ("uvicorn.error", "speaker_transcripts.server")]
    for log in logs:
        log.addHandler(collect)

    async def scenario() -> int | None:
        async with connect(ws_url(live_url)) as socket:
            await socket.recv()
            await socket.send(b"\xff\xfe{", text=True)  # a text frame whose bytes are not UTF-8
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await socket.recv()
            return closed.value.rcvd.code if closed.value.rcvd else None

    try:
        code = asyncio.run(scenario())
    finally:
        for log in logs:
            log.removeHandler(collect)
    assert code == 1007
    assert not any("Traceback" in record or "UnicodeDecodeError" in record for record in records), records
