"""Realtime the way browser apps open it: client secrets (POST /v1/realtime/client_secrets) and WebRTC calls
(POST /v1/realtime/calls) on a real Uvicorn on 127.0.0.1, driven by aiortc as the client (media on loopback
only). Tiny random models: the words are nonsense, the protocol, the secrets and the slots are real. The
page's Record over a call and over a WebSocket opened with a secret, in Chromium: test_page_realtime.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from aiortc import MediaStreamTrack
from servers import serving
from webrtc_client import Call, ClipTrack
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.pipeline.audio import as_float32, decode_file
from speaker_transcripts.server import client_secrets
from speaker_transcripts.server.app import create_app

KEY = "browser-apps-test-key"
APP_ORIGIN = "http://app.example"
ENGLISH = {"type": "transcription", "audio": {"input": {"transcription": {"model": "whisper-1", "language": "en"}}}}


@pytest.fixture(scope="module")
def server(live_handler):
    """One live slot (LIVE_MAX_SESSIONS=1): a test that left a call's slot taken fails the next one's call."""
    settings = ServerSettings(api_key=KEY, webrtc_hosts="127.0.0.1", live_max_sessions=1, live_lookahead_s=0,
                              allowed_origins=APP_ORIGIN)
    app = create_app(lambda: live_handler, settings)
    with serving(app, settings) as url:
        yield SimpleNamespace(url=url, app=app)


@pytest.fixture(scope="module")
def clip(speech_wav) -> np.ndarray:
    """The speech clip twice with pauses (16 kHz): two turns."""
    speech = as_float32(decode_file(speech_wav).samples)
    quiet = np.zeros(24000, dtype=np.float32)
    return np.concatenate([quiet[:8000], speech, quiet, speech, quiet, quiet])


def mint(url: str, key: str = KEY, **body) -> httpx.Response:
    return httpx.post(url + "/v1/realtime/client_secrets", headers={"Authorization": f"Bearer {key}"}, json=body)


async def post_offer(url: str, sdp: str, token: str, **headers) -> httpx.Response:
    async with httpx.AsyncClient(timeout=60) as client:
        return await client.post(url + "/v1/realtime/calls?intent=transcription", content=sdp,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/sdp", **headers})


async def slots_free(app, guard_s: float = 120.0) -> None:
    async with asyncio.timeout(guard_s):
        while app.state.live.active:
            await asyncio.sleep(0.05)


def completed(events: list[dict]) -> int:
    return sum(event["type"] == "conversation.item.input_audio_transcription.completed" for event in events)


def test_a_call_opened_with_a_client_secret_transcribes_its_track_and_speaks_the_protocol_on_its_channel(server, clip):
    minted = mint(server.url, expires_after={"anchor": "created_at", "seconds": 600}, session=ENGLISH)
    assert minted.status_code == 200
    secret = minted.json()
    assert secret["value"].startswith("ek_") and secret["expires_at"] - time.time() == pytest.approx(600, abs=5)
    assert secret["session"]["audio"]["input"]["transcription"]["language"] == "en"

    async def scenario() -> list[dict]:
        call = Call(ClipTrack(clip))
        answer = await post_offer(server.url, await call.offer(), secret["value"])
        assert answer.status_code == 201, answer.text
        assert answer.headers["content-type"].startswith("application/sdp")
        assert re.fullmatch(r"/v1/realtime/calls/rtc_\w+", answer.headers["location"])
        assert re.search(r"^a=fmtp:\d+ maxaveragebitrate=96000\r$", answer.text, re.MULTILINE)  # Opus at up to 96 kbit/s
        await call.answer(answer.text)
        await call.until(lambda events: events and events[0]["type"] == "session.created")
        call.send({"type": "session.update", "session": {"type": "transcription", "audio": {"input": {"transcription": {"prompt": "Directions."}}}}})
        call.send({"type": "input_audio_buffer.append", "audio": "AAAA"})  # a call's audio comes in its track
        events = await call.until(lambda events: completed(events) == 2)
        await call.hang_up()
        await slots_free(server.app)  # hung up: the slot is free again
        return events

    events = asyncio.run(scenario())
    created, updated = events[0], next(event for event in events if event["type"] == "session.updated")
    assert created["session"]["audio"]["input"]["transcription"]["language"] == "en"  # the secret's configuration
    assert updated["session"]["audio"]["input"]["transcription"]["prompt"] == "Directions."
    assert any(event["type"] == "error" and "track" in event["error"]["message"] for event in events)
    for item in dict.fromkeys(event["item_id"] for event in events if "item_id" in event):
        order = [event["type"].rsplit(".", 1)[-1] for event in events if event.get("item_id") == item]
        assert order[0] == "speech_started" and order[-1] == "completed"
        assert order.index("speech_stopped") < order.index("committed")


def test_a_call_by_openais_multipart_form_starts_with_its_session(server):
    async def scenario() -> dict:
        call = Call(ClipTrack(np.zeros(16000, dtype=np.float32)))
        sdp = await call.offer()
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.post(server.url + "/v1/realtime/calls", headers={"Authorization": f"Bearer {KEY}"},
                                       files={"sdp": (None, sdp), "session": (None, json.dumps(ENGLISH))})
        assert answer.status_code == 201, answer.text
        await call.answer(answer.text)
        events = await call.until(lambda events: bool(events))
        await call.hang_up()
        await slots_free(server.app)
        return events[0]

    created = asyncio.run(scenario())
    assert created["type"] == "session.created"
    assert created["session"]["audio"]["input"]["transcription"]["language"] == "en"


def test_a_vanished_peer_ends_its_call_and_frees_its_slot(server, monkeypatch):
    """The peer's UDP sockets close without a word (no DTLS close, no SCTP abort): the server's ICE consent
    checks go unanswered (fewer and faster here) and the call ends as a dropped WebSocket does."""
    import aioice.ice

    monkeypatch.setattr(aioice.ice, "CONSENT_INTERVAL", 0.5)
    monkeypatch.setattr(aioice.ice, "CONSENT_FAILURES", 2)

    async def scenario() -> None:
        call = Call(ClipTrack(np.zeros(16000 * 600, dtype=np.float32)))  # a microphone that never stops
        answer = await post_offer(server.url, await call.offer(), KEY)
        await call.answer(answer.text)
        await call.until(lambda events: bool(events))
        assert server.app.state.live.active == 1
        for transceiver in call.peer.getTransceivers():  # gone: its sockets shut, nothing said
            for protocol in transceiver.receiver.transport.transport.iceGatherer._connection._protocols:
                protocol.transport.abort()
        await slots_free(server.app)
        assert server.app.state.calls == {}
        with contextlib.suppress(Exception):  # its transports are half gone
            await asyncio.wait_for(call.hang_up(), 10)

    asyncio.run(scenario())


def test_sessions_beyond_the_cap_are_refused_on_both_routes_until_the_call_hangs_up(server):
    async def scenario() -> None:
        call = Call(ClipTrack(np.zeros(16000 * 600, dtype=np.float32)))
        answer = await post_offer(server.url, await call.offer(), KEY)
        await call.answer(answer.text)
        await call.until(lambda events: bool(events))
        second = Call(ClipTrack(np.zeros(16000, dtype=np.float32)))
        busy = await post_offer(server.url, await second.offer(), KEY)
        assert busy.status_code == 503 and "LIVE_MAX_SESSIONS" in busy.json()["error"]["message"]
        async with connect(server.url.replace("http", "ws") + "/v1/realtime", additional_headers={"Authorization": f"Bearer {KEY}"}) as socket:
            refusal = json.loads(await socket.recv())
        assert refusal["error"]["code"] == "server_busy"
        await call.hang_up()
        await slots_free(server.app)
        third = await post_offer(server.url, await second.offer(), KEY)  # the slot is back
        assert third.status_code == 201
        await second.answer(third.text)
        await second.until(lambda events: bool(events))
        await second.hang_up()
        await slots_free(server.app)

    asyncio.run(scenario())


def test_an_offer_a_call_cannot_come_of_is_400_with_why_and_takes_no_slot(server):
    async def offers() -> dict[str, str]:
        no_audio, no_channel = Call(), Call(ClipTrack(np.zeros(16000, dtype=np.float32)), channel=False)
        return {"no audio": await no_audio.offer(), "no channel": await no_channel.offer()}

    sdps = asyncio.run(offers())
    cases = {
        "not sdp": (b"hello", "application/sdp", "not an SDP offer"),
        "no audio": (sdps["no audio"], "application/sdp", "no audio track"),
        "no channel": (sdps["no channel"], "application/sdp", "oai-events"),
        "garbled": ("v=0\r\nm=audio x\r\n", "application/sdp", "SDP"),
        "json": (b"{}", "application/json", "application/sdp"),
        "not utf-8": (b"v=0\xff\xfe", "application/sdp", "UTF-8"),
    }
    for name, (body, content_type, says) in cases.items():
        answer = httpx.post(server.url + "/v1/realtime/calls", content=body,
                            headers={"Authorization": f"Bearer {KEY}", "Content-Type": content_type})
        assert answer.status_code == 400, (name, answer.text)
        assert says in answer.json()["error"]["message"], (name, answer.text)
    form = httpx.post(server.url + "/v1/realtime/calls", headers={"Authorization": f"Bearer {KEY}"},
                      files={"sdp": (None, sdps["no channel"]), "session": (None, "{not json")})
    assert form.status_code == 400 and "session" in form.json()["error"]["message"]
    wrong_intent = httpx.post(server.url + "/v1/realtime/calls?intent=conversation", content=sdps["no audio"],
                              headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/sdp"})
    assert wrong_intent.status_code == 400 and "intent" in wrong_intent.json()["error"]["message"]
    assert server.app.state.live.active == 0


def test_a_wrong_or_expired_secret_is_401_on_both_routes(server, monkeypatch):
    secret = mint(server.url, expires_after={"seconds": 10}).json()["value"]
    later = SimpleNamespace(time=lambda: time.time() + 11)
    ws_url = server.url.replace("http", "ws") + "/v1/realtime?intent=transcription"

    async def refused(token: str) -> list[int]:
        call = Call(ClipTrack(np.zeros(16000, dtype=np.float32)))
        statuses = [(await post_offer(server.url, await call.offer(), token)).status_code]
        for options in ({"additional_headers": {"Authorization": f"Bearer {token}"}},
                        {"subprotocols": ["realtime", f"openai-insecure-api-key.{token}"]}):
            with pytest.raises(InvalidStatus) as refusal:
                async with connect(ws_url, **options):
                    pass
            statuses.append(refusal.value.response.status_code)
        return statuses

    assert asyncio.run(refused(secret[:-2] + ("AA" if not secret.endswith("AA") else "BB"))) == [401, 401, 401]
    assert asyncio.run(refused("ek_" + "A" * 43)) == [401, 401, 401]
    monkeypatch.setattr(client_secrets, "time", later)
    assert asyncio.run(refused(secret)) == [401, 401, 401]


def test_a_secret_opens_a_websocket_by_bearer_or_subprotocol_with_its_session(server):
    secret = mint(server.url, session=ENGLISH).json()["value"]
    ws_url = server.url.replace("http", "ws") + "/v1/realtime?intent=transcription"

    async def created(**options) -> dict:
        async with connect(ws_url, **options) as socket:
            event = json.loads(await socket.recv())
        await slots_free(server.app)
        return event

    for options in ({"additional_headers": {"Authorization": f"Bearer {secret}"}},
                    {"subprotocols": ["realtime", f"openai-insecure-api-key.{secret}"]}):
        event = asyncio.run(created(**options))
        assert event["type"] == "session.created"
        assert event["session"]["audio"]["input"]["transcription"]["language"] == "en"


def test_a_secret_opens_nothing_but_realtime_sessions(server, speech_wav):
    secret = mint(server.url).json()["value"]
    bearer = {"Authorization": f"Bearer {secret}"}
    refused = {
        "transcription": httpx.post(server.url + "/v1/audio/transcriptions", headers=bearer,
                                    files={"file": ("a.wav", speech_wav)}, data={"model": "whisper-1"}),
        "voices": httpx.get(server.url + "/v1/voices", headers=bearer),
        "enrol": httpx.post(server.url + "/v1/voices", headers=bearer, files={"file": ("a.wav", speech_wav)}, data={"name": "A"}),
        "forget": httpx.delete(server.url + "/v1/voices/A", headers=bearer),
        "models": httpx.get(server.url + "/v1/models", headers=bearer),
        "minting": httpx.post(server.url + "/v1/realtime/client_secrets", headers=bearer, json={}),
        "hang up": httpx.post(server.url + "/v1/realtime/calls/rtc_x/hangup", headers=bearer),
        "inference endpoints": httpx.post(server.url + "/", headers=bearer, json={"inputs": ""}),
    }
    assert {name: answer.status_code for name, answer in refused.items()} == dict.fromkeys(refused, 401)
    assert httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


@pytest.mark.parametrize(("body", "says"), [
    ({"expires_after": {"seconds": 9}}, "10 to 7200"),
    ({"expires_after": {"seconds": 7201}}, "10 to 7200"),
    ({"expires_after": {"seconds": "600"}}, "10 to 7200"),
    ({"expires_after": {"anchor": "now"}}, "anchor"),
    ({"session": {"type": "realtime"}}, "session.type"),
    ({"session": {"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 8000}}}}}, "8000"),
    ([], "JSON object"),
])
def test_a_secret_asked_for_wrongly_is_400(server, body, says):
    answer = httpx.post(server.url + "/v1/realtime/client_secrets", headers={"Authorization": f"Bearer {KEY}"}, json=body)
    assert answer.status_code == 400 and says in answer.json()["error"]["message"], answer.text


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_secrets_are_bounded_in_number_and_their_values_are_never_logged(live_handler):
    settings = ServerSettings(api_key=KEY, realtime_max_client_secrets=2)
    kept, root = Kept(), logging.getLogger()
    root.addHandler(kept)
    with serving(create_app(lambda: live_handler, settings), settings, log_level="debug") as url:
        values = [mint(url).json()["value"] for _ in range(2)]
        third = mint(url)
        assert third.status_code == 429 and "REALTIME_MAX_CLIENT_SECRETS" in third.json()["error"]["message"]

        async def open_and_close(secret: str) -> None:
            async with connect(url.replace("http", "ws") + "/v1/realtime", subprotocols=["realtime", f"openai-insecure-api-key.{secret}"]) as socket:
                assert json.loads(await socket.recv())["type"] == "session.created"

        asyncio.run(open_and_close(values[0]))
        with pytest.raises(InvalidStatus):
            asyncio.run(open_and_close(values[1] + "x"))
    root.removeHandler(kept)
    assert kept.lines and not any(value[3:] in line for value in values for line in kept.lines)


def test_browser_apps_on_allowed_origins_may_open_calls_and_other_origins_may_not(server):
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
    allowed = httpx.options(server.url + "/v1/realtime/calls", headers={"Origin": APP_ORIGIN, **preflight})
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == APP_ORIGIN
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    other = httpx.options(server.url + "/v1/realtime/calls", headers={"Origin": "http://evil.example", **preflight})
    assert other.status_code == 403 and "access-control-allow-origin" not in other.headers
    posted = httpx.post(server.url + "/v1/realtime/calls", content=b"v=0", headers={"Origin": "http://evil.example",
                        "Authorization": f"Bearer {KEY}", "Content-Type": "application/sdp"})
    assert posted.status_code == 403
    answered = httpx.post(server.url + "/v1/realtime/calls", content=b"v=0", headers={"Origin": APP_ORIGIN,
                          "Authorization": f"Bearer {KEY}", "Content-Type": "application/sdp"})
    assert answered.status_code == 400 and answered.headers["access-control-allow-origin"] == APP_ORIGIN


def test_calls_can_be_turned_off(live_handler):
    settings = ServerSettings(webrtc=False)
    with serving(create_app(lambda: live_handler, settings), settings) as url:
        assert httpx.get(url + "/ready").json()["realtime"] == {"webrtc": False, "client_secrets": True}
        answer = httpx.post(url + "/v1/realtime/calls", content=b"v=0", headers={"Content-Type": "application/sdp"})
        assert answer.status_code == 404 and "WEBRTC=false" in answer.json()["error"]["message"]


class Mute(MediaStreamTrack):
    """A microphone that sends nothing."""

    kind = "audio"

    async def recv(self):
        await asyncio.Event().wait()


def test_a_call_that_sends_no_audio_is_closed_at_the_idle_limit_and_frees_its_slot(live_handler):
    settings = ServerSettings(live_idle_timeout_s=1, live_max_sessions=1)
    app = create_app(lambda: live_handler, settings)
    with serving(app, settings) as url:
        async def scenario() -> list[dict]:
            call = Call(Mute())
            answer = await post_offer(url, await call.offer(), "unused")
            await call.answer(answer.text)
            events = await call.until(lambda events: any(event["type"] == "error" for event in events))
            await slots_free(app)
            await call.hang_up()
            return events

        events = asyncio.run(scenario())
    assert [event["error"]["code"] for event in events if event["type"] == "error"] == ["session_idle"]


def test_media_ports_stay_in_webrtc_ports_and_a_call_finding_none_free_is_503(live_handler):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # a port free now, for a range of one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = ServerSettings(webrtc_ports=f"{port}-{port}", live_max_sessions=2)
    app = create_app(lambda: live_handler, settings)
    with serving(app, settings) as url:
        async def scenario() -> tuple[str, httpx.Response]:
            first, second = Call(ClipTrack(np.zeros(16000 * 60, dtype=np.float32))), Call(ClipTrack(np.zeros(16000, dtype=np.float32)))
            answer = await post_offer(url, await first.offer(), "unused")
            await first.answer(answer.text)
            await first.until(lambda events: bool(events))
            refused = await post_offer(url, await second.offer(), "unused")  # the range's one port is the first call's
            assert app.state.live.active == 1  # the refused call took no slot
            await first.hang_up()
            await slots_free(app)
            return answer.text, refused

        sdp, refused = asyncio.run(scenario())
    candidates = [line.split() for line in sdp.splitlines() if line.startswith("a=candidate:")]
    assert candidates and {(fields[4], int(fields[5])) for fields in candidates} == {("127.0.0.1", port)}
    assert refused.status_code == 503 and "WEBRTC_PORTS" in refused.json()["error"]["message"]


def test_a_call_that_never_connects_is_hung_up_by_the_key_and_frees_its_slot(server):
    """What the page does when its call does not connect before it falls back to the WebSocket."""
    async def scenario() -> None:
        call = Call(ClipTrack(np.zeros(16000, dtype=np.float32)))
        answer = await post_offer(server.url, await call.offer(), KEY)  # its answer never applied: no ICE, no channel
        assert server.app.state.live.active == 1
        async with httpx.AsyncClient() as client:
            with_secret = await client.post(server.url + answer.headers["location"] + "/hangup",
                                            headers={"Authorization": f"Bearer {mint(server.url).json()['value']}"})
            hung_up = await client.post(server.url + answer.headers["location"] + "/hangup", headers={"Authorization": f"Bearer {KEY}"})
            again = await client.post(server.url + answer.headers["location"] + "/hangup", headers={"Authorization": f"Bearer {KEY}"})
        assert (with_secret.status_code, hung_up.status_code) == (401, 200)
        await slots_free(server.app)
        assert again.status_code == 404 or server.app.state.calls == {}
        await call.hang_up()

    asyncio.run(scenario())
