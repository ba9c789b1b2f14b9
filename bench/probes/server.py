"""The server under probe: ``speaker-transcripts serve`` in a subprocess as a user runs it, its memory
sampled, and ``/health`` watched while other requests run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Self

import httpx

ROOT = Path(__file__).resolve().parents[2]

KEY = "probe-key-not-secret"

MAX_CONNECTIONS = 32  # above the 20 slow clients of the slowloris stage; the lock-out stage fills it

MAX_HEALTH_S = 2.0  # /health slower than this while a request is parsed: the event loop was held


class Server:
    """``speaker-transcripts serve`` in a subprocess, with its RSS and open descriptors sampled in a
    thread; over HTTPS when ``tls`` names a certificate, its key and the CA that issued it."""

    def __init__(self, asr_model: str, port: int, tls: tuple[Path, Path, Path] | None = None, **overrides: str) -> None:
        environment = {**os.environ, "ASR_MODEL": asr_model, "DIARIZATION_MODEL": "none", "API_KEY": KEY,
                       "MAX_UPLOAD_MB": "5", "MAX_AUDIO_SECONDS": "120", "MAX_QUEUE": "4", "REQUEST_TIMEOUT_S": "60",
                       "MAX_CONNECTIONS": str(MAX_CONNECTIONS), "WRITE_TIMEOUT_S": "5", **overrides}
        environment = {name: value for name, value in environment.items() if value}  # "": the setting's default
        command = [sys.executable, "-m", "speaker_transcripts", "serve", "--port", str(port), "--log-level", "error"]
        if tls is not None:
            command += ["--ssl-certfile", str(tls[0]), "--ssl-keyfile", str(tls[1])]
        self.process = subprocess.Popen(command, cwd=ROOT, env=environment)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        self.verify: str | bool = str(tls[2]) if tls else True
        self.samples: list[tuple[float, float]] = []
        self.descriptors: list[tuple[float, int]] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2, verify=self.verify).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError("the server did not start")
        self._stop = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def open_descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def _watch(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            self.samples.append((now, self.rss_mb()))
            self.descriptors.append((now, self.open_descriptors()))
            time.sleep(0.05)

    def most_descriptors_since(self, since: float) -> int:
        return max((count for when, count in self.descriptors if when >= since), default=self.open_descriptors())

    def peak_since(self, since: float) -> float:
        return max((rss for when, rss in self.samples if when >= since), default=self.rss_mb())

    def close(self) -> None:
        self._stop.set()
        self.process.terminate()
        self.process.wait(timeout=30)


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
