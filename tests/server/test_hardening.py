"""Bad input, floods, disconnects and secrets: every case gets its documented answer, the service
keeps serving, nothing leaks. The same table runs through the handler and over HTTP.
"""

from __future__ import annotations

import base64
import gc
import io
import logging
import os
import re
import socket
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from audio_files import float_wav, pcm_wav, streamed_wav
from conftest import two_speakers
from servers import serving

from speaker_transcripts.config import ModelCapabilities, ModelSettings, ServerSettings
from speaker_transcripts.errors import AudioTooLongError, InvalidRequestError
from speaker_transcripts.pipeline.transcriber import Transcriber
from speaker_transcripts.server.app import create_app

LIMIT_S = 10.0  # the hardened handler's MAX_AUDIO_SECONDS
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def resampled(samples: np.ndarray, rate: int) -> np.ndarray:
    positions = np.arange(int(len(samples) * rate / 16000)) * 16000 / rate
    return np.interp(positions, np.arange(len(samples)), samples).astype(np.float32)


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("audio.wav", "not really")
    return buffer.getvalue()


@dataclass(frozen=True)
class Case:
    """One bad (or odd) request and its documented answer: an error status and message, or a result."""

    name: str
    inputs: Any  # bytes (sent base64) or a str sent as is
    parameters: Any
    status: int  # 200: a valid result is expected
    message: str = ""  # regex the error (or, for 200, a warning) must match
    empty: bool = False  # 200 with empty text and "no speech detected"


def cases(speech: np.ndarray) -> list[Case]:
    speech_wav = pcm_wav(speech)
    six_channels = np.stack([speech * (0.5 + 0.1 * channel) for channel in range(6)])
    return [
        Case("invalid base64", "@@@ not base64 @@@", {}, 400, "not valid base64"),
        Case("base64 of text", b"Dear diary, today I sent a text file.", {}, 400, "could not decode|no audio"),
        Case("base64 of a PNG", PNG, {}, 400, "could not decode|no audio"),
        Case("base64 of a zip", zip_bytes(), {}, 400, "could not decode|no audio"),
        Case("truncated WAV", speech_wav[: len(speech_wav) // 3], {}, 400, "truncated"),
        Case("0 bytes", "", {}, 400, "empty"),
        Case("WAV header without frames", pcm_wav(np.zeros(0)), {}, 400, "no audio samples|empty|could not decode"),
        Case("50 ms of audio", pcm_wav(speech[:800]), {}, 200, empty=True),
        Case("silence", pcm_wav(np.zeros(16000 * 3)), {}, 200, empty=True),
        Case("noise", pcm_wav(np.random.default_rng(1).standard_normal(16000 * 3) * 0.2), {}, 200, empty=True),
        Case("8 kHz speech", pcm_wav(resampled(speech, 8000), 8000), {}, 200),
        Case("44.1 kHz speech", pcm_wav(resampled(speech, 44100), 44100), {}, 200),
        Case("6-channel speech", pcm_wav(six_channels), {}, 200),
        Case("longer than MAX_AUDIO_SECONDS", pcm_wav(np.tile(speech, 5)), {}, 413, r"limit of 10 s \(MAX_AUDIO_SECONDS\)"),
        Case("parameters not an object", speech_wav, ["language", "en"], 400, "'parameters' must be a JSON object"),
        Case("batch_size wrong type", speech_wav, {"batch_size": "big"}, 400, "batch_size"),
        Case("batch_size 0", speech_wav, {"batch_size": 0}, 400, "batch_size"),
        Case("batch_size huge", speech_wav, {"batch_size": 10**9}, 400, "batch_size"),
        Case("chunk_length_s 0", speech_wav, {"chunk_length_s": 0}, 400, "chunk_length_s"),
        Case("chunk_length_s negative", speech_wav, {"chunk_length_s": -5}, 400, "chunk_length_s"),
        Case("chunk_length_s above 30", speech_wav, {"chunk_length_s": 31}, 400, "chunk_length_s"),
        Case("chunk_length_s wrong type", speech_wav, {"chunk_length_s": "long"}, 400, "chunk_length_s"),
        Case("num_speakers 0", speech_wav, {"num_speakers": 0}, 400, "num_speakers"),
        Case("num_speakers wrong type", speech_wav, {"num_speakers": "two"}, 400, "num_speakers"),
        Case("min_speakers > max_speakers", speech_wav, {"min_speakers": 3, "max_speakers": 2}, 400, "min_speakers .* greater"),
        Case("num_beams out of range", speech_wav, {"num_beams": 17}, 400, "num_beams"),
        Case("sampling_rate out of range", speech_wav, {"sampling_rate": 10}, 400, "sampling_rate"),
        Case("task unknown", speech_wav, {"task": "summarise"}, 400, "task"),
        Case("return_timestamps wrong", speech_wav, {"return_timestamps": "letters"}, 400, "return_timestamps"),
        Case("diarize wrong type", speech_wav, {"diarize": "perhaps"}, 400, "diarize"),
        Case("language wrong type", speech_wav, {"language": 5}, 400, "language"),
        Case("unknown language", speech_wav, {"language": "xx"}, 400, "English-only; language 'xx'"),
        Case("assisted without an assistant", speech_wav, {"assisted": True}, 400, "ASSISTANT_MODEL"),
        Case("translate on an English-only model", speech_wav, {"task": "translate"}, 400, "English-only"),
        Case("unknown parameters", speech_wav, {"temprature": 0.2, "speakers": 2}, 200, "unknown parameter 'temprature'"),
        # round two (issue 12): each a class, not one input
        Case("9-channel speech", pcm_wav(np.stack([speech[:16000]] * 9)), {}, 200),  # under the 1 MB upload limit
        Case("64-channel audio", pcm_wav(np.stack([speech[:4800]] * 64)), {}, 200),
        Case("NaN inside a float WAV", float_wav(np.where(np.arange(len(speech)) == 5000, np.nan, speech)), {}, 400, "NaN or infinite"),
        Case("infinity inside a float WAV", float_wav(np.where(np.arange(len(speech)) == 5, np.inf, speech)), {}, 400, "NaN or infinite"),
        Case("prompt with <|endoftext|>", speech_wav, {"prompt": "hello <|endoftext|>"}, 400, "special tokens"),
        Case("prompt with a timestamp token", speech_wav, {"prompt": "<|0.00|> hi"}, 400, "special tokens"),
        Case("a 200 kB value is not echoed", speech_wav, {"language": "x" * 200_000}, 400, r"^.{0,400}$"),
        Case("a 200 kB unknown name is not echoed", speech_wav, {"y" * 200_000: 1}, 200, r"^unknown parameter '.{0,70}' was ignored$"),
        Case("a value nested 900 deep", speech_wav, {"language": nested(900)}, 400, r"^.{0,400}$"),
        # round three (issue 22)
        Case("a WAV declaring 2 Hz", pcm_wav(speech[:4000], 2), {}, 400, "sample rate of 2 Hz"),
        Case("a WAV declaring 400 kHz", pcm_wav(speech[:4000], 400_000), {}, 400, "sample rate of 400000 Hz"),
        Case("a streamed WAV (no length) over the limit", streamed_wav(np.tile(speech, 5)), {}, 413, "MAX_AUDIO_SECONDS"),
        Case("5000 unknown parameters", speech_wav, {f"p{i}": i for i in range(5000)}, 200, "^4990 more unknown parameters"),
    ]



def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(scope="module")
def speech(speech_wav) -> np.ndarray:
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    return as_float32(decode_file(speech_wav).samples)


@pytest.fixture(scope="module")
def hardened(tiny_models):
    """English-only tiny Whisper, no assistant, the two-speaker seam, a 10-s duration limit."""
    handler = Transcriber(settings=ModelSettings(asr_model=str(tiny_models["whisper_en"]), max_audio_seconds=LIMIT_S))
    handler.diarization_pipeline = two_speakers
    return handler


@pytest.fixture(scope="module")
def hardened_url(hardened):
    with serving(create_app(lambda: hardened, ServerSettings(max_upload_mb=1, max_queue=4))) as base_url:
        yield base_url


def payload(case: Case) -> dict[str, Any]:
    inputs = base64.b64encode(case.inputs).decode() if isinstance(case.inputs, bytes) else case.inputs
    return {"inputs": inputs, "parameters": case.parameters}


def check_result(case: Case, result: dict[str, Any]) -> None:
    assert set(result) >= {"text", "chunks", "speakers", "language", "duration", "warnings"}
    if case.empty:
        assert (result["text"], result["chunks"], result["speakers"]) == ("", [], []) and "no speech detected" in result["warnings"]
    if case.message:
        assert any(re.search(case.message, warning) for warning in result["warnings"]), result["warnings"]


def test_the_matrix_has_at_least_25_cases(speech):
    assert len(cases(speech)) >= 25


def test_matrix_through_the_handler(hardened, speech, speech_wav):
    for case in cases(speech):
        if case.status == 200:
            check_result(case, hardened(payload(case)))
        else:
            expected = AudioTooLongError if case.status == 413 else InvalidRequestError
            with pytest.raises(expected, match=case.message):
                hardened(payload(case))
        assert hardened({"inputs": speech_wav})["duration"] > 0, f"the handler stopped serving after {case.name}"


def test_matrix_over_http(hardened_url, speech, speech_wav):
    with httpx.Client(base_url=hardened_url, timeout=60) as client:
        for case in cases(speech):
            response = client.post("/", json=payload(case))
            assert response.status_code == case.status, (case.name, response.text)
            assert "Traceback" not in response.text and "File \"" not in response.text
            if case.status == 200:
                check_result(case, response.json())
            else:
                assert re.search(case.message, response.json()["error"]), (case.name, response.json())
            assert client.post("/", content=speech_wav).status_code == 200, f"the server stopped serving after {case.name}"
        too_big = client.post("/", content=b"\0" * (2 * 1024 * 1024), headers={"Content-Type": "audio/wav"})
        assert too_big.status_code == 413 and "MAX_UPLOAD_MB" in too_big.json()["error"]
        assert client.post("/", content=speech_wav).status_code == 200


# --- load and faults -------------------------------------------------------------------------


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.parametrize("where", ["body", "multipart parameters", "query string"])
def test_json_nested_beyond_the_parser_is_a_400(hardened_url, speech_wav, where):
    deep = "[" * 100_000 + "]" * 100_000
    if where == "body":
        response = httpx.post(hardened_url + "/predict", content=deep, headers={"Content-Type": "application/json"}, timeout=30)
    elif where == "multipart parameters":
        response = httpx.post(hardened_url + "/predict", files={"file": ("a.wav", speech_wav)}, data={"parameters": deep}, timeout=30)
    else:
        response = httpx.post(hardened_url + "/predict", params={"language": "[" * 5000}, content=speech_wav,
                              headers={"Content-Type": "audio/wav"}, timeout=30)
    assert response.status_code == 400, response.text
    assert len(response.text) < 500
    assert httpx.get(hardened_url + "/health", timeout=10).status_code == 200


def test_32_concurrent_clients_get_their_own_answers(hardened_url, speech):
    """Good requests differ in length (so an answer shows whose it is), bad ones are mixed in, and
    the queue (MAX_QUEUE=4) refuses what it cannot hold with 503 + Retry-After."""
    def send(index: int) -> tuple[int, httpx.Response, float | None]:
        if index % 4 == 3:
            return index, httpx.post(hardened_url + "/", json={"inputs": "!!", "parameters": {}}, timeout=120), None
        padded = np.concatenate([np.zeros(1600 * index, dtype=np.float32), speech])  # + 0.1 s per index
        return index, httpx.post(hardened_url + "/", content=pcm_wav(padded), timeout=120), len(padded) / 16000

    def round_of_32() -> list[tuple[int, httpx.Response, float | None]]:
        with ThreadPoolExecutor(32) as pool:
            return list(pool.map(send, range(32)))

    round_of_32()  # first round: allocator and caches settle
    gc.collect()
    baseline = rss_mb()
    outcomes = round_of_32()
    statuses = {response.status_code for _, response, _ in outcomes}
    assert statuses <= {200, 400, 503}, statuses
    assert 503 in statuses, "32 simultaneous requests must overflow a queue of 4"
    for index, response, duration in outcomes:
        if response.status_code == 503:
            assert int(response.headers["Retry-After"]) >= 1
        elif duration is None:
            assert response.status_code == 400 and "not valid base64" in response.json()["error"]
        else:
            assert response.status_code == 200 and response.json()["duration"] == pytest.approx(duration, abs=0.002), index
    assert sum(response.status_code == 200 for _, response, _ in outcomes) >= 3
    gc.collect()
    assert rss_mb() - baseline < 100, f"memory grew from {baseline:.0f} MB to {rss_mb():.0f} MB over a round"
    assert httpx.get(hardened_url + "/ready", timeout=10).json()["queue"]["in_progress_or_waiting"] == 0


def test_client_disconnecting_mid_upload_does_not_wedge_the_server(hardened_url, speech_wav):
    host, port = hardened_url.removeprefix("http://").split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: audio/wav\r\nContent-Length: 500000\r\n\r\n")
            connection.sendall(speech_wav[:20000])  # then hang up with most of the body unsent
    response = httpx.post(hardened_url + "/", content=speech_wav, timeout=60)
    assert response.status_code == 200


# --- secrets and privacy -----------------------------------------------------------------------


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_tokens_never_reach_logs_reprs_errors_or_responses(tiny_models, speech_wav, tmp_path):
    hf_token, api_key = "hf_hardening_secret_token", "sk-hardening-secret-key"
    captured = Captured()
    captured.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(captured)
    root.setLevel(logging.DEBUG)
    seen: list[str] = []
    try:
        settings = ModelSettings(asr_model=str(tiny_models["whisper_en"]), hf_token=hf_token)
        handler = Transcriber(settings=settings)
        seen += [repr(settings), str(settings), repr(handler.settings), repr(ServerSettings(api_key=api_key))]
        with pytest.raises(RuntimeError) as failed_load:  # a diarization model that cannot load, token set
            Transcriber(settings=settings.model_copy(update={"diarization_model": str(tmp_path / "missing")}))
        seen.append(str(failed_load.value))

        def broken(data):
            raise RuntimeError(f"boom with {hf_token}")  # even a failure that mentions it stays server-side

        broken.settings, broken.configured, broken.capabilities = handler.settings, handler.configured, handler.capabilities
        for target, key in ((handler, api_key), (broken, api_key)):
            app = create_app(lambda target=target: target, ServerSettings(api_key=key))
            with serving(app) as base_url, httpx.Client(base_url=base_url, timeout=60) as client:
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {key}"}):
                    for body in ({"inputs": "!!"}, {"inputs": base64.b64encode(speech_wav).decode()}):
                        response = client.post("/", json=body, headers=headers)
                        seen.append(response.text + str(response.headers))
                seen += [client.get("/ready").text, client.get("/openapi.json").text]
    finally:
        root.removeHandler(captured)
        root.setLevel(previous_level)
    assert any("ERROR" in line for line in captured.lines), "the forced failure was logged"
    everything = "\n".join(seen + captured.lines)
    assert hf_token not in "\n".join(seen), "a token reached a response, repr or error"
    assert api_key not in everything
    leaked = [line for line in captured.lines if hf_token in line]
    assert leaked == [], leaked


def test_pyannote_telemetry_is_off_unless_the_user_opted_in(tiny_pyannote, monkeypatch):
    from speaker_transcripts.pipeline.diarization import load_diarization_pipeline

    monkeypatch.delenv("PYANNOTE_METRICS_ENABLED", raising=False)
    load_diarization_pipeline(ModelSettings(diarization_model=str(tiny_pyannote)), "cpu")
    assert os.environ["PYANNOTE_METRICS_ENABLED"] == "false"
    monkeypatch.setenv("PYANNOTE_METRICS_ENABLED", "true")
    load_diarization_pipeline(ModelSettings(diarization_model=str(tiny_pyannote)), "cpu")
    assert os.environ["PYANNOTE_METRICS_ENABLED"] == "true"


def temporary_file_descriptors() -> list[str]:
    """Open files of this process in the temp folder (Starlette spools big uploads there; on
    Linux they are unnamed O_TMPFILE files, visible only as open descriptors)."""
    folder = tempfile.gettempdir()
    targets = []
    for descriptor in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue
        if target.startswith(folder):
            targets.append(target)
    return targets


def test_uploads_leave_no_temporary_files(hardened, speech):
    """Multipart uploads over 1 MB spill to a temporary file; it must be closed and gone
    afterwards, on success and on every kind of error."""
    good = pcm_wav(np.stack([resampled(np.tile(speech, 3), 44100)] * 2), 44100)  # 8.4 s, 1.5 MB
    too_long = pcm_wav(np.tile(speech, 15))  # 42 s > MAX_AUDIO_SECONDS, 1.3 MB
    junk = b"\x01" * (2 * 1024 * 1024)
    assert min(len(good), len(too_long), len(junk)) > 1024 * 1024
    with serving(create_app(lambda: hardened, ServerSettings(max_upload_mb=8))) as base_url:
        before = temporary_file_descriptors()
        with httpx.Client(base_url=base_url, timeout=60) as client:
            statuses = [
                client.post("/predict", files={"file": ("good.wav", good)}).status_code,
                client.post("/predict", files={"file": ("long.wav", too_long)}).status_code,
                client.post("/predict", files={"file": ("junk.wav", junk)}).status_code,
                client.post("/v1/audio/transcriptions", files={"file": ("good.wav", good)}).status_code,
                client.post("/v1/audio/transcriptions", files={"file": ("junk.wav", junk)}).status_code,
            ]
        # the server closes an upload right after sending its response, so allow it a moment
        deadline = time.monotonic() + 5
        while (after := temporary_file_descriptors()) != before and time.monotonic() < deadline:
            time.sleep(0.05)
    assert statuses == [200, 413, 400, 200, 400]
    assert sorted(after) == sorted(before), f"temporary files left open: {sorted(set(after) - set(before))}"


# --- round three (issue 22) -----------------------------------------------------------------------


def test_warnings_name_ten_unknown_parameters_and_count_the_rest(hardened, speech_wav):
    result = hardened({"inputs": speech_wav, "parameters": {f"p{i}": i for i in range(300_000)}})
    assert len(result["warnings"]) == 11 and result["warnings"][-1] == "299990 more unknown parameters were ignored"


@pytest.mark.parametrize(("limits", "named"), [
    ({"max_queue": 0}, "MAX_QUEUE=0"),
    ({"max_queue": 8, "max_queued_mb": 0.5}, "MAX_QUEUED_MB=0.5"),
], ids=["by count", "by declared size"])
def test_a_full_queue_refuses_an_upload_before_reading_its_body(tiny_models, limits, named):
    """With the queue full, by count or by the bytes admitted work holds, a 900-kB upload is 503 at
    once: its body is never read, so 200 concurrent uploads can no longer hold 200 bodies in memory
    only to be refused (17 uploads of 95 MB held +2.4 GB when only the queued ones were weighed)."""
    import threading

    release = threading.Event()

    class Busy:
        settings = configured = ModelSettings(asr_model="busy")
        capabilities = ModelCapabilities(multilingual=False, language_codes=frozenset({"en"}))

        def __call__(self, data, **callbacks):
            release.wait(30)
            return {"text": "", "chunks": [], "speakers": [], "language": "en", "duration": 0.0, "decoding": "none",
                    "warnings": []}

    with serving(create_app(lambda: Busy(), ServerSettings(**limits))) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(httpx.post, base_url + "/", content=b"RIFF", headers={"Content-Type": "audio/wav"}, timeout=30)
            deadline = time.monotonic() + 10
            while httpx.get(base_url + "/ready", timeout=5).json()["queue"]["in_progress_or_waiting"] == 0:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with socket.create_connection((host, int(port)), timeout=120) as connection:  # a failure guard only
                connection.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: audio/wav\r\nContent-Length: 900000\r\n\r\n")
                answer = connection.recv(65536).decode()  # no byte of the body is ever sent: only the headers can decide
            release.set()
            assert running.result().status_code == 200
    assert answer.startswith("HTTP/1.1 503") and "retry-after" in answer.lower() and named in answer


def test_probes_answer_head_and_options_and_slashes_are_not_redirected(hardened_url):
    assert httpx.head(f"{hardened_url}/health", timeout=5).status_code == 200
    assert httpx.head(f"{hardened_url}/ready", timeout=5).status_code == 200
    options = httpx.options(f"{hardened_url}/ready", timeout=5)
    assert options.status_code == 204 and options.headers["allow"] == "GET, HEAD, OPTIONS"
    slashed = httpx.get(f"{hardened_url}/health/", headers={"Host": "evil"}, timeout=5, follow_redirects=False)
    assert slashed.status_code == 404 and "location" not in slashed.headers


def test_an_api_key_in_the_query_string_is_refused_and_not_logged(hardened, speech_wav):
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    access = logging.getLogger("uvicorn.access")
    collector = Collect()
    settings = ServerSettings(api_key="sk-query-secret")
    with serving(create_app(lambda: hardened, settings), settings, log_level="info") as base_url:
        access.addHandler(collector)  # after Uvicorn has configured its loggers
        try:
            refused = httpx.post(f"{base_url}/?api_key=sk-query-secret&language=en", content=speech_wav,
                                 headers={"Content-Type": "audio/wav"}, timeout=30)
        finally:
            access.removeHandler(collector)
    assert refused.status_code == 401
    assert records and not any("sk-query-secret" in record for record in records), records


def test_a_samples_array_is_read_as_numbers_not_as_a_list_of_floats(monkeypatch):
    """{"inputs": {"array": [...]}} is read by numpy from the text, a few MB at a time (a 65-MB body:
    27 MB at the peak against 161 MB through json.loads, tracemalloc), to the same float32 values;
    anything that is not a flat list of numbers goes through json as before (and its errors)."""
    import json as json_module

    import numpy as np

    from speaker_transcripts.server.routers import endpoints

    monkeypatch.setattr(endpoints, "NUMBERS_BLOCK", 64)  # many blocks, cut at commas
    values = np.random.default_rng(0).standard_normal(500).astype(np.float32) * np.float32(1e-3)
    body = json_module.dumps({"inputs": {"array": [float(v) for v in values] + [1e5, -0.0, 3], "sampling_rate": 8000},
                              "parameters": {"array": [1]}}).encode()
    parsed = endpoints.parse_body(body, "bad")
    assert isinstance(parsed["inputs"]["array"], np.ndarray) and parsed["inputs"]["array"].dtype == np.float32
    assert np.array_equal(parsed["inputs"]["array"], np.array(json_module.loads(body)["inputs"]["array"], dtype=np.float32))
    assert parsed["parameters"] == {"array": [1]} and parsed["inputs"]["sampling_rate"] == 8000
    assert endpoints.parse_body(b'{"inputs": {"array": [1, true]}}', "bad")["inputs"]["array"] == [1, True]  # json's, refused later
    assert endpoints.parse_body(b'{"inputs": {"array": [[1, 2], [3, 4]]}}', "bad")["inputs"]["array"] == [[1, 2], [3, 4]]
    with pytest.raises(InvalidRequestError, match="bad"):
        endpoints.parse_body(b'{"inputs": {"array": [1, 2,]}}', "bad")


@pytest.mark.parametrize("model", ["whisper\r\nX-Injected: 1", "wh\u00efsper-\u4e00", "w\x00", "x" * 200])
def test_a_model_name_that_cannot_be_a_header_is_a_400_before_the_audio_is_read(hardened_url, speech_wav, model):
    response = httpx.post(hardened_url + "/v1/audio/transcriptions", data={"model": model}, files={"file": ("a.wav", speech_wav)}, timeout=60)
    assert response.status_code == 400 and "is not a model name" in response.json()["error"]["message"], response.text
    assert "X-Injected" not in response.headers
    assert httpx.get(hardened_url + "/health", timeout=10).status_code == 200


def test_a_known_speakers_clip_of_thirty_seconds_fits_in_an_openai_form_field(live_handler, speech_wav):
    """A 29.9-s clip as a data URL (1.3 MB of base64) was refused by the form parser ("Part exceeded maximum
    size of 1024KB"); it now reaches the clip's own checks, which allow 30 s, and the speaker is enrolled."""
    import numpy as np
    from audio_files import pcm_wav

    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    speech = as_float32(decode_file(speech_wav).samples)
    clip = pcm_wav(np.tile(speech, 11)[: int(29.9 * 16000)])
    reference = "data:audio/wav;base64," + base64.b64encode(clip).decode()
    assert len(reference) > 1024 * 1024
    with serving(create_app(lambda: live_handler, ServerSettings(max_upload_mb=5))) as base_url:
        response = httpx.post(base_url + "/v1/audio/transcriptions", files={"file": ("a.wav", speech_wav)}, timeout=120,
                              data={"model": "whisper-1", "response_format": "diarized_json", "known_speaker_names[]": "Ann",
                                    "known_speaker_references[]": reference})
    assert response.status_code == 200, response.text


def test_an_enrolment_with_two_name_fields_is_refused_not_given_the_last(hardened_url, speech_wav):
    answer = httpx.post(f"{hardened_url}/v1/voices", data={"name": ["Reader A", "Reader B"]}, files={"file": ("a.wav", speech_wav)},
                        timeout=30)
    assert answer.status_code == 400 and "one name field" in answer.json()["error"]["message"]
