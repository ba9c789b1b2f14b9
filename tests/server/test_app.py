"""The server over real HTTP: Uvicorn on 127.0.0.1, called with httpx, openai and InferenceClient.

Whisper is the tiny random model (its words are nonsense); diarization is a fixed two-speaker
pipeline plugged into the handler's seam, so speaker labels are known in advance.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import wave
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from servers import serving

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.pipeline.transcriber import Transcriber
from speaker_transcripts.server.app import create_app
from speaker_transcripts.server.errors import ServiceError
from speaker_transcripts.server.inference import InferenceQueue

ROOT = Path(__file__).resolve().parents[2]
SPEECH_SECONDS = 2.786
SPEAKERS = {"ALICE", "BOB"}


@pytest.fixture(scope="module")
def handler(served_handler):
    return served_handler


@pytest.fixture(scope="module")
def url(server_url):
    return server_url


@pytest.fixture
def client(url):
    with httpx.Client(base_url=url, timeout=120) as http:
        yield http


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def assert_good_request_still_served(client, speech_wav):
    response = client.post("/", json={"inputs": b64(speech_wav), "parameters": {"language": "en"}})
    assert response.status_code == 200, response.text


# --- the Endpoints contract -------------------------------------------------------------------


def test_json_raw_and_multipart_bodies_give_the_same_result(client, handler, speech_wav):
    # assisted pinned: "auto" may pick either path per request, and word times differ by a frame
    parameters = {"language": "en", "return_timestamps": "word", "num_speakers": 2, "assisted": False}
    as_json = client.post("/", json={"inputs": b64(speech_wav), "parameters": parameters})
    as_raw = client.post(
        "/predict", params={"language": "en", "return_timestamps": "word", "num_speakers": "2", "assisted": "false"},
        content=speech_wav, headers={"Content-Type": "audio/wav"},
    )
    as_multipart = client.post(
        "/predict", files={"file": ("clip.wav", speech_wav, "audio/wav")}, data={"parameters": json.dumps(parameters)}
    )
    bodies = [response.json() for response in (as_json, as_raw, as_multipart)]
    assert [r.status_code for r in (as_json, as_raw, as_multipart)] == [200, 200, 200], bodies
    assert bodies[0] == bodies[1] == bodies[2]
    assert bodies[0] == handler({"inputs": speech_wav, "parameters": parameters}), "the server passes the handler's answer through"
    result = bodies[0]
    assert result["warnings"] == [], "query-string values are typed: '2' is the integer 2"
    assert result["language"] == "en" and result["duration"] == pytest.approx(SPEECH_SECONDS, abs=0.01)
    assert {segment["speaker"] for segment in result["speakers"]} <= SPEAKERS and result["speakers"]


def test_octet_stream_and_missing_content_type_are_raw_audio(client, speech_wav):
    for headers in ({"Content-Type": "application/octet-stream"}, {}):
        response = client.post("/predict?language=en&diarize=false", content=speech_wav, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["speakers"] == []


@pytest.mark.parametrize(
    ("request_kwargs", "status", "message"),
    [
        ({"content": b"<html/>", "headers": {"Content-Type": "text/html"}}, 415, "unsupported content type 'text/html'"),
        ({"content": b"{not json", "headers": {"Content-Type": "application/json"}}, 400, "not valid JSON"),
        ({"json": [1, 2, 3]}, 400, "must be a JSON object"),
        ({"json": {"inputs": "%%%"}}, 400, "not valid base64"),
        ({"json": {"inputs": b64(b"plain text, not audio")}}, 400, "could not decode"),
        ({"json": {"parameters": {}}}, 400, "inputs"),
        ({"content": b"", "headers": {"Content-Type": "audio/wav"}}, 400, "empty"),
        ({"files": {"audio": ("a.wav", b"x")}}, 400, "'file' field"),
        ({"files": {"file": ("a.wav", b"RIFF")}, "data": {"parameters": "[1]"}}, 400, "must be a JSON object"),
        ({"content": b"RIFF", "params": {"batch_size": "0"}, "headers": {"Content-Type": "audio/wav"}}, 400, "batch_size"),
        ({"content": b"RIFF", "params": {"diarize": "maybe"}, "headers": {"Content-Type": "audio/wav"}}, 400, "diarize"),
        ({"content": b"\0" * (1024 * 1024 + 1), "headers": {"Content-Type": "audio/wav"}}, 413, "MAX_UPLOAD_MB"),
    ],
)
def test_bad_requests_get_clear_errors_and_the_server_keeps_serving(client, speech_wav, request_kwargs, status, message):
    response = client.post("/predict", **request_kwargs)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert "Traceback" not in response.text
    assert_good_request_still_served(client, speech_wav)


def test_chunked_upload_over_the_limit_is_refused(client, speech_wav):
    def body():
        for _ in range(20):
            yield b"\0" * 65536  # 1.25 MB in all, sent without a Content-Length

    response = client.post("/predict", content=body(), headers={"Content-Type": "audio/wav"})
    assert response.status_code == 413 and "MAX_UPLOAD_MB" in response.json()["error"]
    assert_good_request_still_served(client, speech_wav)


def test_audio_longer_than_the_limit_is_413(client, handler, speech_wav, monkeypatch):
    monkeypatch.setattr(handler.settings, "max_audio_seconds", 1.0)
    response = client.post("/predict", content=speech_wav, headers={"Content-Type": "audio/wav"})
    assert response.status_code == 413
    assert "limit of 1 s (MAX_AUDIO_SECONDS)" in response.json()["error"]


def test_health_ready_and_openapi(client):
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready").json()
    assert ready["status"] == "ready" and ready["device"] == "cpu"
    assert ready["dtype"] == ready["precision"] and ready["dtype"].startswith("int8 decoder"), "what it computes in, not float32"
    assert ready["models"]["assistant"] and ready["auth"] is False
    schema = client.get("/openapi.json").json()
    assert {"/", "/predict", "/v1/audio/transcriptions", "/v1/audio/translations", "/health", "/ready"} <= set(schema["paths"])
    assert {"EndpointResponse", "VerboseTranscription", "DiarizedTranscription"} <= set(schema["components"]["schemas"])
    assert set(schema["paths"]["/predict"]["post"]["requestBody"]["content"]) >= {"application/json", "audio/*", "multipart/form-data"}
    docs = client.get("/docs")
    assert docs.status_code == 200 and "script-src 'self';" in docs.headers["content-security-policy"]
    scripts = re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', docs.text)
    assert scripts and all(url.startswith("/") for url in scripts), "Swagger UI from this server, not a CDN"
    for url in scripts:
        assert client.get(url).status_code == 200, url
    assert client.get("/redoc").status_code == 404  # ReDoc comes only from a CDN: off


def test_unexpected_failure_is_a_500_without_details(speech_wav, handler):
    def broken(data):
        raise RuntimeError("CUDA exploded at /secret/path")

    broken.settings, broken.configured, broken.capabilities = handler.settings, handler.configured, handler.capabilities
    with serving(create_app(lambda: broken, ServerSettings())) as base_url:
        response = httpx.post(base_url + "/", json={"inputs": b64(speech_wav)}, timeout=30)
    assert response.status_code == 500
    assert "internal error" in response.json()["error"] and "secret" not in response.text


# --- auth, queue, timeout ---------------------------------------------------------------------


def test_api_key_guards_inference_but_not_health(handler, speech_wav):
    key = "sk-local-test-key"
    app = create_app(lambda: handler, ServerSettings(api_key=key))
    with serving(app) as base_url, httpx.Client(base_url=base_url, timeout=60) as http:
        body = {"inputs": b64(speech_wav), "parameters": {"language": "en"}}
        missing = http.post("/", json=body)
        wrong = http.post("/", json=body, headers={"Authorization": "Bearer nope"})
        wrong_openai = http.post("/v1/audio/transcriptions", files={"file": ("a.wav", speech_wav)},
                                 headers={"Authorization": "Bearer nope"})
        right = http.post("/", json=body, headers={"Authorization": f"Bearer {key}"})
        assert http.get("/health").status_code == 200 and http.get("/ready").status_code == 200
        openapi = http.get("/openapi.json").text
        ready = http.get("/ready").text
    assert missing.status_code == wrong.status_code == wrong_openai.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert wrong_openai.json()["error"]["code"] == 401
    assert right.status_code == 200
    for text in (missing.text, wrong.text, right.text, openapi, ready):
        assert key not in text


def test_headers_alone_decide_before_the_body_is_read(handler, speech_wav):
    """An anonymous 50-MB upload is refused from its headers (the body never sent here); two
    Authorization headers and oversized headers are refused too, and the server keeps serving."""
    import socket

    key = "sk-local-test-key"
    with serving(create_app(lambda: handler, ServerSettings(api_key=key))) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=120) as connection:  # a failure guard only
            connection.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: audio/wav\r\nContent-Length: 52428800\r\n\r\n")
            answer = connection.recv(4096)  # no byte of the body is ever sent: only the headers can decide
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        with httpx.Client(base_url=base_url, timeout=30) as http:
            twice = http.post("/predict", content=speech_wav, headers=[("Content-Type", "audio/wav"),
                              ("Authorization", f"Bearer {key}"), ("Authorization", "Bearer other")])
            huge = http.post("/predict", content=speech_wav, headers={"Content-Type": "audio/wav",
                             "Authorization": f"Bearer {key}", "X-Padding": "x" * 200_000})
            fine = http.post("/predict", content=speech_wav, headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {key}"})
    assert twice.status_code == 400 and "one Authorization header" in twice.json()["error"]
    assert huge.status_code == 431, huge.status_code
    assert fine.status_code == 200


class HeldUntilStopped:
    """The real handler, made to hold each call until the server tells it to stop (the client hung
    up, the deadline passed): then the real handler runs with that stop signal and abandons the
    work. What each call came to is recorded, so tests assert on what the server did, never on how
    long anything took. ``holding = False`` lets calls through."""

    def __init__(self, handler: Transcriber) -> None:
        self.handler, self.holding, self.outcomes = handler, True, []
        self.settings, self.configured, self.capabilities = handler.settings, handler.configured, handler.capabilities

    def __call__(self, data, should_stop=None, **callbacks):
        from speaker_transcripts.errors import RequestAbandoned

        guard = time.monotonic() + 120  # a failure guard only: the server stops held work long before
        while self.holding and not should_stop() and time.monotonic() < guard:
            time.sleep(0.01)
        try:
            result = self.handler(data, should_stop=should_stop, **callbacks)
        except RequestAbandoned:
            self.outcomes.append("stopped")
            raise
        self.outcomes.append("finished")
        return result


def wait_for(condition, what: str, guard_s: float = 120.0) -> None:
    """Poll ``condition`` until it holds; the guard only turns a hang into a failure naming ``what``."""
    deadline = time.monotonic() + guard_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)


def queued(base_url: str) -> int:
    return httpx.get(base_url + "/ready", timeout=30).json()["queue"]["in_progress_or_waiting"]


def test_full_queue_answers_503_with_retry_after(handler, speech_wav):
    """With MAX_QUEUE=1, one request runs and one waits; every further one is refused with 503 and
    Retry-After while they are there, and the two admitted ones are answered, each with its own answer."""
    held = HeldUntilStopped(handler)
    app = create_app(lambda: held, ServerSettings(max_queue=1))
    body = {"inputs": b64(speech_wav), "parameters": {"language": "en", "diarize": False, "assisted": False}}
    with serving(app) as base_url, ThreadPoolExecutor(2) as pool:
        admitted = [pool.submit(httpx.post, base_url + "/", json=body, timeout=60) for _ in range(2)]
        wait_for(lambda: queued(base_url) == 2, "both admitted requests reaching the queue")
        refused = [httpx.post(base_url + "/", json=body, timeout=60) for _ in range(3)]
        held.holding = False
        answers = [future.result() for future in admitted]
        after = httpx.post(base_url + "/", json=body, timeout=60)
        queue = httpx.get(base_url + "/ready").json()["queue"]
    assert [response.status_code for response in refused] == [503] * 3
    assert all(int(response.headers["Retry-After"]) >= 1 and "MAX_QUEUE=1" in response.json()["error"] for response in refused)
    assert [answer.status_code for answer in answers] == [200, 200]
    assert answers[0].json() == answers[1].json(), "every answer is the answer to its own request"
    assert after.status_code == 200 and queue["in_progress_or_waiting"] == 0


def with_silence(wav: bytes, seconds: float) -> bytes:
    """``wav`` with ``seconds`` of silence after it, in its own format."""
    with wave.open(io.BytesIO(wav)) as source:
        params, frames = source.getparams(), source.readframes(source.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as target:
        target.setparams(params)
        target.writeframes(frames + bytes(int(seconds * params.framerate) * params.sampwidth * params.nchannels))
    return out.getvalue()


def test_the_queue_admits_by_the_audio_it_holds_not_only_by_count(handler, speech_wav):
    """MAX_QUEUED_MB bounds what admitted requests hold: with one running, a request that would take
    the total past it is refused (503 naming the setting) though MAX_QUEUE has room; smaller ones
    still queue, and with nothing admitted a request over it is taken, so any allowed upload runs."""
    held = HeldUntilStopped(handler)
    app = create_app(lambda: held, ServerSettings(max_queue=8, max_queued_mb=1))
    small = {"inputs": b64(speech_wav), "parameters": {"language": "en", "diarize": False, "assisted": False}}
    heavy = {"inputs": b64(with_silence(speech_wav, seconds=14)), "parameters": small["parameters"]}  # 0.54 MB, 0.72 in base64
    with serving(app) as base_url, ThreadPoolExecutor(2) as pool:
        first = pool.submit(httpx.post, base_url + "/", json=heavy, timeout=60)  # nothing admitted: taken
        wait_for(lambda: queued(base_url) == 1, "the heavy request running")
        ready = httpx.get(base_url + "/ready").json()["queue"]
        refused = httpx.post(base_url + "/", json=heavy, timeout=60)
        second = pool.submit(httpx.post, base_url + "/", json=small, timeout=60)
        wait_for(lambda: queued(base_url) == 2, "the small request queued")
        held.holding = False
        answers = [first.result(), second.result()]
        after = httpx.get(base_url + "/ready").json()["queue"]
    assert 0.5 < ready["held_mb"] < 1 and ready["max_queued_mb"] == 1
    assert refused.status_code == 503 and "MAX_QUEUED_MB=1" in refused.json()["error"] and int(refused.headers["Retry-After"]) >= 1
    assert [answer.status_code for answer in answers] == [200, 200]
    assert after["held_mb"] == 0 and after["in_progress_or_waiting"] == 0


class Sleeper:
    """Stands in for the handler: each call takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, data, **callbacks):
        time.sleep(self.seconds)
        return {"text": ""}


def test_retry_after_is_the_time_until_a_slot_frees_not_the_whole_queue():
    """Calls take 1 s; with one running and two waiting, a refused client can come back in about
    a second (when the running call ends), not in 3 s (each queued call's time added up)."""

    async def scenario() -> tuple[int, int]:
        queue = InferenceQueue(Sleeper(1.0), ServerSettings(max_queue=2), redact=str)
        await queue.run({})  # one call's time on record
        waiting = [asyncio.ensure_future(queue.run({})) for _ in range(3)]
        while queue.pending < 3:  # one running, two waiting
            await asyncio.sleep(0.01)
        with pytest.raises(ServiceError) as refused:
            await queue.run({})
        pending = queue.pending
        await asyncio.gather(*waiting)
        queue.close()
        return int(refused.value.headers["Retry-After"]), pending

    retry_after, pending = asyncio.run(scenario())
    assert pending == 3 and retry_after == 1


def test_processing_timeout_is_504_its_work_is_stopped_and_the_server_recovers(handler, speech_wav):
    """Work held past REQUEST_TIMEOUT_S is answered 504 and told to stop; it stops, frees its slot,
    and the next request is served."""
    held = HeldUntilStopped(handler)
    with serving(create_app(lambda: held, ServerSettings(request_timeout_s=0.5))) as base_url:
        slow = httpx.post(base_url + "/", json={"inputs": b64(speech_wav)}, timeout=60)
        wait_for(lambda: queued(base_url) == 0, "the timed-out work leaving the queue")
        health = httpx.get(base_url + "/health", timeout=30)
    held.holding = False
    with serving(create_app(lambda: held, ServerSettings())) as base_url:  # the same models, no deadline
        served = httpx.post(base_url + "/", json={"inputs": b64(speech_wav), "parameters": {"language": "en"}}, timeout=60)
    assert slow.status_code == 504 and "REQUEST_TIMEOUT_S" in slow.json()["error"]
    assert health.status_code == 200
    assert held.outcomes == ["stopped", "finished"]
    assert served.status_code == 200


def test_client_disconnecting_mid_inference_does_not_wedge_the_server(handler, speech_wav):
    held = HeldUntilStopped(handler)
    with serving(create_app(lambda: held, ServerSettings())) as base_url:
        with pytest.raises(httpx.TimeoutException):  # a read timeout, or mid-upload on a busy machine: a hang-up either way
            httpx.post(base_url + "/", json={"inputs": b64(speech_wav)}, timeout=0.1)
        wait_for(lambda: queued(base_url) == 0, "the abandoned request leaving the queue")
        held.holding = False
        response = httpx.post(base_url + "/", json={"inputs": b64(speech_wav), "parameters": {"language": "en"}}, timeout=30)
    assert response.status_code == 200


def test_abandoned_work_is_stopped_and_frees_its_slot(handler, speech_wav):
    """Six clients send their request and hang up while their work is running or queued: all six
    are told to stop and stop (the running ones at once, the queued ones as soon as they reach the
    models), the queue empties, and the next client is served. Asserted on what the server did
    (the queue's depth, each call's outcome), not on how long it took."""
    held = HeldUntilStopped(handler)
    app = create_app(lambda: held, ServerSettings(max_queue=8))
    body = json.dumps({"inputs": b64(speech_wav), "parameters": {"language": "en", "batch_size": 1}}).encode()
    request = b"POST / HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    with serving(app) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        clients = [socket.create_connection((host, int(port)), timeout=30) for _ in range(6)]
        for client in clients:
            client.sendall(request + body)
        wait_for(lambda: queued(base_url) == 6, "all six requests reaching the queue")
        for client in clients:
            client.close()
        wait_for(lambda: queued(base_url) == 0, "the abandoned work leaving the queue")
        held.holding = False
        served = httpx.post(base_url + "/", content=body, headers={"Content-Type": "application/json"}, timeout=60)
    assert held.outcomes == ["stopped"] * 6 + ["finished"]
    assert served.status_code == 200


def test_a_request_half_closed_after_sending_is_stopped_like_a_hang_up(handler, speech_wav):
    """A client that shuts its side down after sending cannot be told from one that has gone until the
    server writes to it; the server stops the work and closes (docs/errors.md, "Limits"), as it does
    for hang-ups, so that clients that are gone never hold the queue."""
    held = HeldUntilStopped(handler)
    body = json.dumps({"inputs": b64(speech_wav), "parameters": {"language": "en"}}).encode()
    with serving(create_app(lambda: held, ServerSettings())) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as client:
            client.sendall(b"POST / HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            wait_for(lambda: queued(base_url) == 1, "the request reaching the queue")
            client.shutdown(socket.SHUT_WR)
            assert client.recv(1024) == b"", "closed unanswered"
        wait_for(lambda: queued(base_url) == 0, "the work leaving the queue")
    assert held.outcomes == ["stopped"]


# --- the OpenAI audio API ---------------------------------------------------------------------


def openai_post(client, speech_wav, route="/v1/audio/transcriptions", **fields):
    fields.setdefault("model", "whisper-1")
    return client.post(route, files={"file": ("clip.wav", speech_wav, "audio/wav")}, data=fields)


def test_openai_formats_over_http(client, speech_wav):
    as_json = openai_post(client, speech_wav, response_format="json", language="en")
    assert as_json.status_code == 200 and set(as_json.json()) == {"text"}

    text = openai_post(client, speech_wav, response_format="text", language="en")
    assert text.headers["content-type"].startswith("text/plain") and text.text == as_json.json()["text"] + "\n"

    srt = openai_post(client, speech_wav, response_format="srt", language="en")
    assert srt.headers["content-type"].startswith("application/x-subrip")
    assert srt.text.startswith("1\n00:00:0") and ("ALICE: " in srt.text or "BOB: " in srt.text)

    vtt = openai_post(client, speech_wav, response_format="vtt", language="en")
    assert vtt.text.startswith("WEBVTT\n") and ("<v ALICE>" in vtt.text or "<v BOB>" in vtt.text)

    verbose = openai_post(
        client, speech_wav, response_format="verbose_json", language="en", **{"timestamp_granularities[]": ["word", "segment"]}
    ).json()
    assert verbose["task"] == "transcribe" and verbose["language"] == "english"
    assert verbose["duration"] == pytest.approx(SPEECH_SECONDS, abs=0.01)
    assert verbose["words"] and verbose["segments"]
    assert {segment["speaker"] for segment in verbose["segments"]} <= SPEAKERS
    assert [segment["id"] for segment in verbose["segments"]] == list(range(len(verbose["segments"])))

    diarized = openai_post(client, speech_wav, response_format="diarized_json", language="en").json()
    assert diarized["segments"] and all(s["type"] == "transcript.text.segment" for s in diarized["segments"])
    assert {segment["speaker"] for segment in diarized["segments"]} <= SPEAKERS


def test_diarized_subtitles_are_timed_by_their_words(client, handler, speech_wav):
    """Diarizing computes word times for attribution; the cues keep them rather than sharing a
    segment's time out by characters: the route's SRT is the one laid out from the words. (For the
    test model's few short words both layouts can coincide; tests/output/test_formats.py shows
    word times placing boundaries that segments would not.)"""
    from speaker_transcripts.output.formats import subtitle_cues, to_srt

    same = {"language": "en", "assisted": False}  # not "auto": the decoding policy learns from timings
    by_words = handler({"inputs": speech_wav, "parameters": {**same, "return_timestamps": "word"}})
    served = openai_post(client, speech_wav, response_format="srt", language="en", assisted="false").text
    assert by_words["chunks"] and served == to_srt(subtitle_cues(by_words))


def test_segments_read_alike_with_and_without_diarization(client, speech_wav):
    """No leading space on a segment's text, diarized or not (Whisper's own segments had one)."""
    for diarize in ("true", "false"):
        verbose = openai_post(client, speech_wav, response_format="verbose_json", language="en", diarize=diarize).json()
        assert verbose["segments"] and all(segment["text"] == segment["text"].strip() for segment in verbose["segments"]), diarize


def test_openai_translation_and_errors(client, speech_wav):
    translated = openai_post(client, speech_wav, route="/v1/audio/translations", response_format="verbose_json")
    assert translated.status_code == 200 and translated.json()["task"] == "translate"

    undiarized = openai_post(client, speech_wav, response_format="verbose_json", diarize="false", language="en").json()
    assert all("speaker" not in segment for segment in undiarized["segments"])

    for fields, status, message in [
        ({"temperature": "0.7"}, 400, "temperature"),
        ({"response_format": "docx"}, 422, "response_format"),
        ({"timestamp_granularities[]": "letters"}, 422, "timestamp_granularities"),
        ({"language": "klingon"}, 400, "unknown language"),
        ({"num_speakers": "0"}, 400, "num_speakers"),
    ]:
        response = openai_post(client, speech_wav, **fields)
        assert response.status_code == status, (fields, response.text)
        error = response.json()["error"]
        assert message in error["message"] and error["code"] == status and error["type"] == "invalid_request_error"
    missing_file = client.post("/v1/audio/transcriptions", data={"model": "whisper-1"})
    assert missing_file.status_code == 422 and "file" in missing_file.json()["error"]["message"]


def test_official_openai_client_every_format(url, speech_wav):
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    audio = ("clip.wav", speech_wav, "audio/wav")
    plain = client.audio.transcriptions.create(model="whisper-1", file=audio, language="en")
    assert isinstance(plain.text, str)
    verbose = client.audio.transcriptions.create(
        model="whisper-1", file=audio, language="en", response_format="verbose_json",
        timestamp_granularities=["word", "segment"], extra_body={"num_speakers": 2, "diarize": True},
    )
    assert verbose.language == "english" and verbose.words and verbose.segments
    assert {segment.model_extra["speaker"] for segment in verbose.segments} <= SPEAKERS
    for response_format, start in (("text", ""), ("srt", "1\n"), ("vtt", "WEBVTT")):
        body = client.audio.transcriptions.create(model="whisper-1", file=audio, language="en", response_format=response_format)
        assert isinstance(body, str) and body.startswith(start)
    translation = client.audio.translations.create(model="whisper-1", file=audio)
    assert isinstance(translation.text, str)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.audio.transcriptions.create(model="whisper-1", file=audio, temperature=0.5)
    with pytest.raises(openai.BadRequestError, match="num_speakers"):  # extensions travel in extra_body
        client.audio.transcriptions.create(model="whisper-1", file=audio, extra_body={"num_speakers": 0})


def server_sent_events(response) -> list[dict]:
    return [json.loads(line.removeprefix("data: ")) for line in response.iter_lines() if line.startswith("data: ")]


def test_streaming_transcription_over_http(url, speech_wav):
    """stream=true: deltas as pieces are decoded, then speaker segments and the full text."""
    import httpx

    form = {"model": "whisper-1", "language": "en", "stream": "true", "response_format": "diarized_json"}
    with httpx.stream("POST", url + "/v1/audio/transcriptions", data=form, files={"file": ("c.wav", speech_wav)}, timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = server_sent_events(response)
    kinds = [event["type"] for event in events]
    assert kinds[-1] == "transcript.text.done" and kinds.count("transcript.text.done") == 1
    deltas = [event for event in events if event["type"] == "transcript.text.delta"]
    segments = [event for event in events if event["type"] == "transcript.text.segment"]
    assert deltas and kinds.index("transcript.text.delta") < kinds.index("transcript.text.done")
    assert "".join(event["delta"] for event in deltas) == events[-1]["text"], "the deltas add up to the text"
    assert all(0 <= event["start"] <= event["end"] for event in deltas)
    assert segments and {event["speaker"] for event in segments} <= SPEAKERS


def test_streaming_refusals_are_still_plain_errors(url, speech_wav):
    import httpx

    form = {"model": "whisper-1", "stream": "true"}
    bad_audio = httpx.post(url + "/v1/audio/transcriptions", data=form, files={"file": ("c.wav", b"not audio")}, timeout=60)
    assert bad_audio.status_code == 400 and "error" in bad_audio.json()
    srt = httpx.post(url + "/v1/audio/transcriptions", data={**form, "response_format": "srt"},
                     files={"file": ("c.wav", speech_wav)}, timeout=60)
    assert srt.status_code == 400 and "server-sent events" in srt.json()["error"]["message"]


def test_official_openai_client_reads_the_stream(url, speech_wav):
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    stream = client.audio.transcriptions.create(
        model="whisper-1", file=("clip.wav", speech_wav, "audio/wav"), language="en", stream=True
    )
    events = list(stream)
    assert events[-1].type == "transcript.text.done"
    assert "".join(event.delta for event in events if event.type == "transcript.text.delta") == events[-1].text


def test_inference_client_against_the_endpoint_route(url, speech_wav, monkeypatch):
    import huggingface_hub.constants
    from huggingface_hub import InferenceClient

    # The suite runs with HF_HUB_OFFLINE=1, which huggingface_hub applies even to a local URL.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    client = InferenceClient()
    with_parameters = client.automatic_speech_recognition(speech_wav, model=url, extra_body={"language": "en", "num_speakers": 2})
    assert {segment["speaker"] for segment in with_parameters["speakers"]} <= SPEAKERS and with_parameters["speakers"]
    assert with_parameters["language"] == "en"
    raw = client.automatic_speech_recognition(speech_wav, model=url)  # sent as raw bytes
    assert isinstance(raw.text, str) and raw["duration"] == pytest.approx(SPEECH_SECONDS, abs=0.01)


# --- `uvicorn speaker_transcripts.server.app:app` as users start it -----------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_uvicorn_command_serves_env_configured_models(tiny_models, speech_wav):
    port = free_port()
    env = {**os.environ, "ASR_MODEL": str(tiny_models["whisper_en"]), "DIARIZATION_MODEL": "none", "API_KEY": "k", "MAX_QUEUE": "3"}
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "speaker_transcripts.server.app:app", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read()
            try:
                ready = httpx.get(base_url + "/ready", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not start in 120 s"
                time.sleep(0.5)
        response = httpx.post(base_url + "/", content=speech_wav, headers={"Authorization": "Bearer k"}, timeout=60)
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=30)[0]
    assert ready["models"]["asr"] == str(tiny_models["whisper_en"]) and ready["queue"]["max_queue"] == 3
    assert response.status_code == 200 and response.json()["language"] == "en"
    assert process.returncode == 0, output
    assert "Traceback" not in output
    assert f"{tiny_models['whisper_en']}: speech recognition on cpu" in output  # the model-load line, as serve shows it


def test_uvicorn_command_with_an_unloadable_model_exits_with_one_line():
    """No Hub here (HF_HUB_OFFLINE=1, as on an air-gapped machine): a Hub id fails in seconds,
    naming the embedded alternative, without a traceback, and the process exits non-zero."""
    process = subprocess.run(
        [sys.executable, "-m", "uvicorn", "speaker_transcripts.server.app:app", "--host", "127.0.0.1", "--port", str(free_port())],
        cwd=ROOT, env={**os.environ, "ASR_MODEL": "openai/whisper-never-cached", "DIARIZATION_MODEL": "none"},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert process.returncode != 0
    errors = [line for line in process.stderr.splitlines() if line.startswith("ERROR")]
    assert errors[0].startswith("ERROR:    could not load the models: ASR_MODEL=openai/whisper-never-cached cannot be fetched")
    assert "ASR_MODEL=whisper-base" in errors[0] and "HF_TOKEN" in errors[0]
    assert "Traceback" not in process.stderr and len(process.stderr.splitlines()) <= 5, process.stderr


def test_the_answer_carries_the_speaker_timeline_when_diarized(client, speech_wav):
    diarized = client.post("/", json={"inputs": b64(speech_wav), "parameters": {"language": "en"}}).json()
    assert diarized["diarization"] == [{"speaker": "ALICE", "start": 0.0, "end": 1.4}, {"speaker": "BOB", "start": 1.4, "end": 3.0}]
    plain = client.post("/", json={"inputs": b64(speech_wav), "parameters": {"language": "en", "diarize": False}}).json()
    assert "diarization" not in plain


def test_diarization_route_answers_json_or_rttm_and_task_diarize_skips_asr(client, speech_wav, handler, monkeypatch):
    def no_asr(*args, **kwargs):
        raise AssertionError("diarization alone must not run speech recognition")

    monkeypatch.setattr(handler.recognizer, "transcribe", no_asr)
    answer = client.post("/v1/audio/diarization", files={"file": ("standup.wav", speech_wav)})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "duration": SPEECH_SECONDS,
        "segments": [{"speaker": "ALICE", "start": 0.0, "end": 1.4}, {"speaker": "BOB", "start": 1.4, "end": 3.0}],
        "warnings": [],
    }
    rttm = client.post("/v1/audio/diarization", files={"file": ("standup.wav", speech_wav)}, data={"response_format": "rttm"})
    assert rttm.headers["content-type"].startswith("text/plain")
    assert rttm.text.splitlines() == [
        "SPEAKER standup 1 0.000 1.400 <NA> <NA> ALICE <NA> <NA>",
        "SPEAKER standup 1 1.400 1.600 <NA> <NA> BOB <NA> <NA>",
    ]
    payload = client.post("/", json={"inputs": b64(speech_wav), "parameters": {"task": "diarize"}}).json()
    assert (payload["text"], payload["speakers"], payload["decoding"]) == ("", [], "none")
    assert [turn["speaker"] for turn in payload["diarization"]] == ["ALICE", "BOB"]


def test_known_speakers_need_a_pipeline_that_embeds_voices(client, speech_wav):
    """The stand-in diarization has no embedding model: naming is refused, not silently skipped."""
    known = {"known_speakers": [{"name": "Ann", "audio": b64(speech_wav)}]}
    for response in (
        client.post("/", json={"inputs": b64(speech_wav), "parameters": known}),
        client.post("/v1/audio/diarization", files={"file": ("a.wav", speech_wav)},
                    data={"known_speaker_names[]": ["Ann"], "known_speaker_references[]": [b64(speech_wav)]}),
    ):
        assert response.status_code == 400
        error = response.json()["error"]  # the Endpoints shape (a string), the OpenAI one (an object) under /v1
        assert "needs a diarization pipeline with a speaker-embedding model" in (error if isinstance(error, str) else error["message"])
    bad_format = client.post("/v1/audio/diarization", files={"file": ("a.wav", speech_wav)}, data={"response_format": "srt"})
    assert bad_format.status_code in (400, 422)


def test_a_model_name_this_server_does_not_serve_is_decoded_with_a_warning(client, speech_wav):
    """OpenAI's names are aliases of the loaded model; any other name used to be taken silently."""
    unknown = openai_post(client, speech_wav, response_format="verbose_json", language="en", model="whisper-large-v9").json()
    assert any("whisper-large-v9" in warning and "GET /v1/models" in warning for warning in unknown["warnings"]), unknown["warnings"]
    alias = openai_post(client, speech_wav, response_format="verbose_json", language="en", model="whisper-1").json()
    assert not any("is not served here" in warning for warning in alias["warnings"])


def test_subtitles_from_the_pages_words_keep_the_subtitle_rules(client):
    """POST /v1/subtitles: the page's downloads (corrections and names included) by the rules of every other route."""
    import srt

    sentence = "And Mr. John Dashwood had then leisure to consider how much there might be prudently in his power to do for them."
    words = [{"text": f" {word}", "start": 0.4 * index, "end": 0.4 * index + 0.35, "speaker": "Reader B"}
             for index, word in enumerate(sentence.split())]
    words.insert(0, {"text": " Hello.", "start": 0.0, "end": 0.1, "speaker": "Reader A"})
    answer = client.post("/v1/subtitles", json={"format": "srt", "words": words})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-subrip")
    cues = list(srt.parse(answer.text))
    assert cues[0].content == "Reader A: Hello." and len(cues) >= 3  # a new cue for a new speaker; a long sentence in several
    assert all(len(line) <= 42 for cue in cues for line in cue.content.splitlines())
    assert all(len(cue.content.splitlines()) <= 2 and (cue.end - cue.start).total_seconds() <= 7.0 for cue in cues)
    assert " ".join(cue.content.replace("Reader B: ", "").replace("Reader A: ", "") for cue in cues).split() == ["Hello.", *sentence.split()]
    vtt = client.post("/v1/subtitles", json={"format": "vtt", "words": words})
    assert vtt.text.startswith("WEBVTT") and "<v Reader A>Hello." in vtt.text
    assert client.post("/v1/subtitles", json={"format": "docx", "words": words}).status_code == 422


def test_a_stream_asked_for_progress_says_each_stage_and_the_audio_decoded_before_the_words(url, speech_wav):
    """progress=true (the page asks for it): a 30-s file's pieces decode in one batch, so the first words came
    after all the work and the page's bar sat at 0; the stages and the decoder's steps move it now."""
    import json

    form = {"model": "whisper-1", "language": "en", "stream": "true", "progress": "true", "response_format": "diarized_json"}
    with httpx.stream("POST", url + "/v1/audio/transcriptions", data=form, files={"file": ("c.wav", speech_wav)}, timeout=60) as response:
        events = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    kinds = [event["type"] for event in events]
    progress = [event for event in events if event["type"] == "transcript.progress"]
    assert kinds[0] == "transcript.progress" and progress[0]["stage"] == "finding speech"
    assert kinds.index("transcript.progress") < kinds.index("transcript.text.delta") and kinds[-1] == "transcript.text.done"
    stages = list(dict.fromkeys(event["stage"] for event in progress))
    assert stages[:2] == ["finding speech", "transcribing"]
    seconds = [event["seconds"] for event in progress]
    assert seconds == sorted(seconds) and seconds[-1] > 0
    plain = {key: value for key, value in form.items() if key != "progress"}  # OpenAI's clients: OpenAI's events only
    with httpx.stream("POST", url + "/v1/audio/transcriptions", data=plain, files={"file": ("c.wav", speech_wav)}, timeout=60) as response:
        assert not any("transcript.progress" in line for line in response.iter_lines())
