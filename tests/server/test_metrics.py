"""``GET /metrics`` scraped with prometheus-client's own parser while requests run, and
``GET /v1/models`` read with the official ``openai`` client."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from servers import serving

from speaker_transcripts.config import ModelCapabilities, ModelSettings, ServerSettings
from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.server.app import create_app

AUDIO_SECONDS = 2.5


class Timed:
    """Stands in for the orchestrator: each call takes ``seconds`` and answers 2.5 s of audio;
    ``"inputs": "bad"`` is refused as a client error."""

    settings = configured = ModelSettings(asr_model="openai/whisper-large-v3")
    capabilities = ModelCapabilities(multilingual=True, language_codes=frozenset({"en"}))

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, data, should_stop=None, **callbacks):
        if data.get("inputs") == "bad":
            raise InvalidRequestError("'inputs' is not valid base64")
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            if should_stop is not None and should_stop():
                from speaker_transcripts.errors import RequestAbandoned

                raise RequestAbandoned("stopped")
            time.sleep(0.01)
        return {"text": "hi", "chunks": [], "speakers": [], "language": "en", "duration": AUDIO_SECONDS,
                "decoding": "none", "warnings": []}


def scrape(base_url: str, **headers: str) -> dict[tuple[str, tuple], float]:
    """Every sample of the exposition, keyed by name and sorted labels, parsed as Prometheus would."""
    text = httpx.get(base_url + "/metrics", headers=headers, timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_requests_latency_audio_queue_and_load_time_are_scraped_while_work_runs():
    with serving(create_app(lambda: Timed(0.6), ServerSettings(max_queue=1))) as base_url:
        with ThreadPoolExecutor(4) as pool:
            posted = [pool.submit(httpx.post, base_url + "/", json={"inputs": "UklGRg=="}, timeout=30) for _ in range(4)]
            deadline = time.monotonic() + 20  # a loaded machine may take a while to admit the first one
            during = scrape(base_url)
            while during[("speaker_transcripts_queue_depth", ())] < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
                during = scrape(base_url)
            statuses = sorted(future.result().status_code for future in posted)
        httpx.post(base_url + "/", json={"inputs": "bad"}, timeout=30)
        httpx.get(base_url + "/no/such/page", timeout=10)
        after = scrape(base_url)
    assert during[("speaker_transcripts_queue_depth", ())] >= 1, "work in flight is seen while it runs"
    assert after[("speaker_transcripts_queue_depth", ())] == 0
    ok, busy = statuses.count(200), statuses.count(503)
    assert ok >= 2 and ok + busy == 4, statuses
    assert after[("speaker_transcripts_requests_total", (("route", "/"), ("status", "200")))] == ok
    assert after.get(("speaker_transcripts_requests_total", (("route", "/"), ("status", "503"))), 0) == busy
    assert after[("speaker_transcripts_requests_total", (("route", "/"), ("status", "400")))] == 1
    assert after[("speaker_transcripts_requests_total", (("route", "unmatched"), ("status", "404")))] == 1
    assert after[("speaker_transcripts_audio_seconds_total", ())] == pytest.approx(ok * AUDIO_SECONDS)
    assert after[("speaker_transcripts_real_time_factor_count", ())] == ok
    assert after[("speaker_transcripts_real_time_factor_sum", ())] >= ok * 0.6 / AUDIO_SECONDS
    assert after[("speaker_transcripts_request_duration_seconds_count", (("route", "/"),))] == ok + busy + 1
    assert after[("speaker_transcripts_model_load_seconds", ())] >= 0


def test_abandoned_work_is_counted():
    with serving(create_app(lambda: Timed(5.0), ServerSettings(request_timeout_s=0.3))) as base_url:
        timed_out = httpx.post(base_url + "/", json={"inputs": "UklGRg=="}, timeout=30)
        samples = scrape(base_url)
    assert timed_out.status_code == 504
    assert samples[("speaker_transcripts_abandoned_requests_total", ())] == 1


@pytest.mark.parametrize("public", [False, True])
def test_metrics_need_the_key_unless_public(public):
    key = "metrics-secret-key"
    with serving(create_app(lambda: Timed(0.0), ServerSettings(api_key=key, metrics_public=public))) as base_url:
        anonymous = httpx.get(base_url + "/metrics", timeout=10)
        keyed = httpx.get(base_url + "/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert keyed.status_code == 200 and keyed.headers["content-type"].startswith("text/plain")
    assert anonymous.status_code == (200 if public else 401)
    assert key not in keyed.text


def test_the_openai_client_lists_and_retrieves_the_loaded_model():
    from openai import NotFoundError, OpenAI

    key = "models-key"
    with serving(create_app(lambda: Timed(0.0), ServerSettings(api_key=key))) as base_url:
        client = OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0)
        listed = client.models.list()
        retrieved = client.models.retrieve("openai/whisper-large-v3")
        alias = client.models.retrieve("whisper-1")  # the name the docs' examples send
        with pytest.raises(NotFoundError):
            client.models.retrieve("whisper-2")
        anonymous = httpx.get(base_url + "/v1/models", timeout=10)
    assert [model.id for model in listed.data] == ["openai/whisper-large-v3", "whisper-1", "gpt-4o-transcribe",
                                                   "gpt-4o-mini-transcribe", "gpt-4o-transcribe-diarize"]
    assert (retrieved.object, retrieved.owned_by) == ("model", "openai") and retrieved.created <= time.time()
    assert alias.owned_by == "speaker-transcripts (decoded by openai/whisper-large-v3)"
    assert anonymous.status_code == 401, "OpenAI's API needs the key for models too"


def test_a_client_hanging_up_mid_upload_is_counted_as_499_not_as_a_server_failure():
    import socket

    with serving(create_app(lambda: Timed(0.0), ServerSettings())) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"inputs\": \"")
            time.sleep(0.2)  # the body has started; nothing more comes
        deadline = time.monotonic() + 60  # a failure guard: the count appears once the server has seen the hang-up
        while not any(labels == (("route", "/"), ("status", "499")) for (name, labels) in scrape(base_url)):
            assert time.monotonic() < deadline, scrape(base_url)
            time.sleep(0.1)
        counted = scrape(base_url)
    assert ("speaker_transcripts_requests_total", (("route", "/"), ("status", "500"))) not in counted
