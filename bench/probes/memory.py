"""Memory inside the documented defaults: the largest inputs the defaults admit, their peak RSS
against bounds derived from the settings."""

from __future__ import annotations

import io
import random
import time
import wave
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from probes.server import MAX_HEALTH_S, HealthWatch
from tests.audio_files import pcm_wav


def defaults_memory(make_server: Any, key: str, speech: np.ndarray, rng: random.Random) -> tuple[list[tuple], list[str], dict[str, float]]:
    """On a server with the documented defaults (MAX_UPLOAD_MB=100, MAX_QUEUE=16, MAX_QUEUED_MB=300):
    a 95-MB samples array, a 95-MB many-channel 8-bit WAV, a 95-MB WAV of silence, each alone
    (what, status, peak RSS above idle MB, slowest /health s), then 17 concurrent 95-MB uploads.
    The bounds they are held to are derived from the settings (README "Memory bounds")."""
    server = make_server(MAX_UPLOAD_MB="100", MAX_QUEUE="16", MAX_QUEUED_MB="300", MAX_AUDIO_SECONDS="10800", REQUEST_TIMEOUT_S="120")
    size = 95_000_000
    channels = rng.choice([32, 48, 64])
    samples = rng.randbytes(1024) * (size // 1024)
    samples = samples[: len(samples) // channels * channels]  # whole frames
    many = _pcm8_wav(channels, samples)
    per_request = (100 + 10800 * 64 / 1000 + 500) / 1000  # body + decoded float32 at 16 kHz + model working memory, GB
    whole = per_request + 0.3 + per_request  # + MAX_QUEUED_MB + one more upload decoding beside the running request
    bounds = {"one request, GB": round(per_request, 2), "the server, GB": round(whole, 2)}
    rows, failures = [], []
    try:
        url, headers = server.url, {"Authorization": f"Bearer {key}"}
        httpx.post(url + "/", content=pcm_wav(speech[:32000]), headers={**headers, "Content-Type": "audio/wav"}, timeout=120)
        idle = server.rss_mb()
        array = b'{"inputs": {"array": [' + b"0.0001, " * ((size - 60) // 8) + b'0.0], "sampling_rate": 16000}}'
        cases = [("95-MB samples array (JSON)", array, "application/json"), (f"95-MB {channels}-channel 8-bit WAV", many, "audio/wav"),
                 ("95-MB WAV of silence", pcm_wav(np.zeros((size - 44) // 2)), "audio/wav")]
        for what, content, kind in cases:
            started = time.monotonic()
            with HealthWatch(url) as watch:
                answer = httpx.post(url + "/", content=content, params={"language": "en"}, headers={**headers, "Content-Type": kind}, timeout=600)
            peak = server.peak_since(started) - idle
            rows.append((what, answer.status_code if answer.status_code < 400 else f"{answer.status_code} {answer.text[:80]}", peak, watch.slowest))
            if answer.status_code >= 500 and answer.status_code != 504 or peak > per_request * 1000 or watch.slowest > MAX_HEALTH_S:
                failures.append(f"defaults, {what}: {answer.status_code}, +{peak:.0f} MB, /health {watch.slowest:.1f} s")
        noise = pcm_wav(np.random.default_rng(0).uniform(-0.3, 0.3, (size - 44) // 2))
        started = time.monotonic()

        def upload(_: int) -> int:
            try:
                return httpx.post(url + "/", content=noise, params={"language": "en"}, timeout=30,
                                  headers={**headers, "Content-Type": "audio/wav"}).status_code
            except httpx.TimeoutException:
                return 0  # admitted and still running when the client gave up: the probe hangs up
        with ThreadPoolExecutor(17) as pool:
            statuses = Counter(pool.map(upload, range(17)))
        peak = server.peak_since(started) - idle
        rows.append(("17 concurrent 95-MB uploads", dict(statuses), peak, 0.0))
        if any(status >= 500 and status not in (503, 504) for status in statuses) or peak > whole * 1000:
            failures.append(f"defaults, 17 uploads: {dict(statuses)}, +{peak:.0f} MB against the {whole:.2f}-GB bound")
    finally:
        server.close()
    return rows, failures, bounds


def _pcm8_wav(channels: int, data: bytes, rate: int = 16000) -> bytes:
    """8-bit PCM WAV of raw bytes (``data`` whole frames), written by the standard library."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(1)
        writer.setframerate(rate)
        writer.writeframes(data)
    return buffer.getvalue()
