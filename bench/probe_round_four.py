"""The fourth round's classes for ``bench/probe.py``: answers that amplify the request, client text in
headers, long speaker names in subtitles, memory inside the documented defaults, and a batch job
over an odd corpus. Each function draws its own random variants and returns rows for the probe's
table plus the failures it saw (an empty list when the class holds).
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import wave
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.audio_files import pcm_wav

MAX_ERROR_BYTES = 64 * 1024  # an error answer larger than this amplifies the request
MAX_HEALTH_S = 2.0  # /health slower than this while a request is parsed: the event loop was held


class HealthWatch:
    """Polls ``/health`` every 0.1 s in a thread; ``slowest`` is the longest answer (inf: none came)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.slowest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.1):
            started = time.monotonic()
            try:
                ok = httpx.get(self.url + "/health", timeout=30).status_code == 200
            except httpx.HTTPError:
                ok = False
            self.slowest = max(self.slowest, time.monotonic() - started if ok else float("inf"))


def amplifying_errors(url: str, key: str, rng: random.Random, server: Any, max_upload_mb: float) -> tuple[list[tuple], list[str]]:
    """Small bodies whose parameters hold very long lists (known speakers, a language, a prompt):
    (kind, body MB, status, answer kB, seconds, slowest /health s, peak RSS above before MB)."""
    items = rng.randint(50_000, 200_000)
    clip = base64.b64encode(b"RIFF" + bytes(40)).decode()
    audio = base64.b64encode(pcm_wav(np.zeros(8000))).decode()
    bodies = {  # kind: the parameters with a list of n items
        "known_speakers: a long list": lambda n: {"known_speakers": [{"name": f"p{index}", "audio": clip} for index in range(n)]},
        "language: a list": lambda n: {"language": list(range(n * 4))},
        "prompt: a list of strings": lambda n: {"prompt": ["word"] * n * 3},
        "many unknown parameters": lambda n: {f"x{index}": [index] for index in range(n)},
    }
    rows, failures = [], []
    for kind, parameters in bodies.items():
        count = items
        while len(content := json.dumps({"inputs": audio, "parameters": parameters(count)}).encode()) >= max_upload_mb * 1e6:
            count //= 2  # inside the upload limit
        before = server.rss_mb()
        started = time.monotonic()
        with HealthWatch(url) as watch:
            answer = httpx.post(url + "/", content=content, headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
                                timeout=120)
        seconds = time.monotonic() - started
        rows.append((kind, len(content) / 1e6, answer.status_code, len(answer.content) / 1e3, seconds, watch.slowest,
                     server.peak_since(started) - before))
        if answer.status_code >= 500 or len(answer.content) > MAX_ERROR_BYTES or watch.slowest > MAX_HEALTH_S:
            failures.append(f"amplifying error, {kind}: {answer.status_code}, {len(answer.content)} bytes, /health {watch.slowest:.1f} s")
    return rows, failures


def client_text_in_headers(url: str, key: str, rng: random.Random, wav: bytes) -> tuple[list[tuple], list[str]]:
    """The OpenAI form's ``model`` with text no header may carry: (what, status, header injected)."""
    model = rng.choice(["whisper-1", "gpt-4o-transcribe"])
    cases = {"not latin-1": model + rng.choice(["\u4e00", "\u00e9\u20ac", "\U0001f600"]),
             "CR/LF": model + "\r\nX-Injected: 1", "NUL": model + "\x00", "200 characters": "m" * 200}
    rows, failures = [], []
    for what, value in cases.items():
        try:
            answer = httpx.post(url + "/v1/audio/transcriptions", data={"model": value}, files={"file": ("a.wav", wav, "audio/wav")},
                                headers={"Authorization": f"Bearer {key}"}, timeout=60)
            status, injected = answer.status_code, "X-Injected" in answer.headers
        except httpx.HTTPError as error:
            status, injected = 0, False
            failures.append(f"model field, {what}: no answer ({type(error).__name__})")
        rows.append((what, status, injected))
        if status != 400 or injected:
            failures.append(f"model field, {what}: {status}{', header injected' if injected else ''}")
    return rows, failures


def long_names_in_subtitles(url: str, key: str, rng: random.Random, wav: bytes, clip: bytes) -> tuple[list[tuple], list[str]]:
    """A known speaker named with 36-64 characters, subtitles asked: every word of the transcript
    must be whole in the cues. (name length, words, words split across cues)."""
    rows, failures = [], []
    reference = "data:audio/wav;base64," + base64.b64encode(clip).decode()
    for length in (rng.randint(36, 42), rng.randint(43, 64)):
        name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(length - 2)).strip().title() or "Name"
        name = (name + "xy")[:length]
        fields = {"model": "gpt-4o-transcribe-diarize", "known_speaker_names[]": name, "known_speaker_references[]": reference,
                  "language": "en"}
        asked = {fmt: httpx.post(url + "/v1/audio/transcriptions", data={**fields, "response_format": fmt},
                                 files={"file": ("a.wav", wav, "audio/wav")}, headers={"Authorization": f"Bearer {key}"}, timeout=120)
                 for fmt in ("json", "srt")}
        if any(answer.status_code != 200 for answer in asked.values()):
            failures.append(f"long name ({length}): {[answer.status_code for answer in asked.values()]}")
            continue
        words = re.findall(r"[\w']+", asked["json"].json()["text"].lower())
        cues = [line.split(": ", 1)[-1] for line in asked["srt"].text.splitlines() if line and "-->" not in line and not line.isdigit()]
        heard = re.findall(r"[\w']+", " ".join(cues).lower())
        split = sum(word not in words for word in heard if word not in name.lower().split())
        rows.append((len(name), len(words), split))
        if split:
            failures.append(f"long name ({len(name)} characters): {split} words split in the cues")
    return rows, failures


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


def odd_corpus(asr_model: str, rng: random.Random, speech: np.ndarray) -> tuple[list[tuple], list[str]]:
    """The batch command on a corpus of many tiny files and odd inputs (a FIFO, a name with a newline
    and a tab, a symlink loop under a glob), while a second job is started on the same --out; and a
    manifest naming itself, which must be refused in a line before anything starts: (what, outcome)."""
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "corpus"
        (folder / "loop").mkdir(parents=True)
        os.symlink(folder / "loop", folder / "loop" / "again")
        (folder / "loop" / "inside.wav").write_bytes(pcm_wav(speech[:1600]))
        count = rng.randint(300, 600)
        tiny = pcm_wav(speech[: 1600])
        for index in range(count):
            (folder / f"short-{index:04d}.wav").write_bytes(tiny)
        (folder / "odd\nname\t.wav").write_bytes(tiny)
        os.mkfifo(folder / "pipe.wav")
        manifest = folder / "self.txt"
        manifest.write_text(f"{manifest}\n{folder / 'short-0000.wav'}\n")
        out = Path(scratch) / "out"
        options = ["--out", str(out), "--asr-model", asr_model, "--no-diarize", "--language", "en"]
        environment = {**os.environ, "DIARIZATION_MODEL": "none"}
        looping = subprocess.run([sys.executable, "-m", "speaker_transcripts", "batch", str(manifest), *options], check=False, cwd=ROOT,
                                 env=environment, capture_output=True, text=True, timeout=300)
        rows.append(("a manifest naming itself", (f"exit {looping.returncode}, {len(looping.stderr.splitlines())} line(s): "
                                                 f"{looping.stderr.strip()[-100:]}")))
        if looping.returncode != 2 or len(looping.stderr.splitlines()) > 2:
            failures.append(f"odd corpus: a manifest naming itself gave exit {looping.returncode} and {len(looping.stderr.splitlines())} lines")
        command = [sys.executable, "-m", "speaker_transcripts", "batch", str(folder), str(folder / "loop" / "**" / "*.wav"),
                   str(folder / "pipe.wav"), *options]
        started = time.monotonic()
        job = subprocess.Popen(command, cwd=ROOT, env=environment, stderr=subprocess.PIPE, text=True)
        first_row = None
        lines: list[str] = []
        second = None
        for line in job.stderr:
            lines.append(line)
            if first_row is None and line.startswith("[1/"):
                first_row = time.monotonic() - started
                second = subprocess.run(command, check=False, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
        job.wait(timeout=1800)
        written = (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").exists() else []
        tracebacks = sum("Traceback" in line for line in lines)
        rows += [("inputs listed", lines[0].strip() if lines else "nothing"), ("first row after", f"{first_row or float('inf'):.0f} s"),
                 ("rows written", len(written)), ("exit status", job.returncode), ("tracebacks", tracebacks),
                 ("second job on the same --out", f"exit {second.returncode}: {second.stderr.strip()[-120:]}" if second else "not started")]
        if job.returncode not in (0, 1) or tracebacks or first_row is None or first_row > 60:
            failures.append(f"odd corpus: exit {job.returncode}, {tracebacks} tracebacks, first row {first_row}")
        if second is None or second.returncode != 2:
            failures.append("odd corpus: a second job on the same --out was not refused")
    return rows, failures
