"""An outside probe of the server: random variants of every kind of bad or heavy request, slow
clients and mass hang-ups, against ``speaker-transcripts serve`` run as a user runs it, while its memory is watched.

    python bench/probe.py [--asr-model whisper-tiny.en] [--variants 8] [--seed 0]

The server runs as a subprocess (``API_KEY``, ``MAX_UPLOAD_MB=5``, ``MAX_AUDIO_SECONDS=120``,
``MAX_QUEUE=4``, ``REQUEST_TIMEOUT_S=60``, no diarization), its RSS sampled every 50 ms. Kinds,
each drawn ``--variants`` times with fresh random sizes, positions and values (never the test
suite's exact inputs): undecodable and truncated audio, random channel counts, NaN/Inf at random
places in float WAVs, JSON nested thousands deep in the body, ``parameters``, multipart and the
query string, huge integers in arrays, special tokens and huge values in ``prompt``, every
parameter out of range; the heaviest requests the documented ranges allow (peak RSS above idle
for each); slowloris headers and stalled bodies; and 20 clients hanging up mid-request (time until
the queue is empty and a good request is answered). Prints a table; exits 1 on any 500 or a
request that got no answer.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.audio_files import float_wav, pcm_wav

KEY = "probe-key-not-secret"
SPECIAL_TOKENS = ("<|endoftext|>", "<|0.00|>", "<|startoftranscript|>", "<|notimestamps|>", "<|en|>")


class Server:
    """``speaker-transcripts serve`` in a subprocess, with its RSS sampled in a thread."""

    def __init__(self, asr_model: str, port: int) -> None:
        environment = {**os.environ, "ASR_MODEL": asr_model, "DIARIZATION_MODEL": "none", "API_KEY": KEY,
                       "MAX_UPLOAD_MB": "5", "MAX_AUDIO_SECONDS": "120", "MAX_QUEUE": "4", "REQUEST_TIMEOUT_S": "60"}
        self.process = subprocess.Popen([sys.executable, "-m", "speaker_transcripts", "serve", "--port", str(port), "--log-level", "error"],
                                        cwd=ROOT, env=environment)
        self.url = f"http://127.0.0.1:{port}"
        self.samples: list[tuple[float, float]] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
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

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.rss_mb()))
            time.sleep(0.05)

    def peak_since(self, since: float) -> float:
        return max((rss for when, rss in self.samples if when >= since), default=self.rss_mb())

    def close(self) -> None:
        self._stop.set()
        self.process.terminate()
        self.process.wait(timeout=30)


def bad_requests(rng: random.Random, speech: np.ndarray) -> list[tuple[str, dict[str, Any]]]:
    """(kind, httpx request arguments) for one random variant of each bad-input kind."""
    clip = speech[: rng.randint(8000, len(speech))]
    wav = pcm_wav(clip)

    def endpoint(inputs: Any, parameters: Any = None) -> dict[str, Any]:
        body = {"inputs": inputs if isinstance(inputs, (str, dict)) else base64.b64encode(inputs).decode()}
        if parameters is not None:
            body["parameters"] = parameters
        return {"url": "/", "content": json.dumps(body).encode(), "headers": {"Content-Type": "application/json"}}

    depth = rng.randint(2000, 20000)
    deep = "[" * depth + "]" * depth
    bad_position = rng.randrange(len(clip))
    channels = rng.choice([2, 3, 7, 9, 13, 24, 33, 48, 64])
    frames = np.stack([clip[: 16000 * 2] * rng.uniform(0.2, 1.0) for _ in range(channels)])
    parameter, value = rng.choice([
        ("batch_size", rng.choice([0, -1, 257, 10**rng.randint(3, 30), "many", 2.5])),
        ("chunk_length_s", rng.choice([0, -1, 30.5, 1e300, "long"])),
        ("num_beams", rng.choice([0, 17, 10**6, "wide"])),
        ("num_speakers", rng.choice([0, -3, 101, "two"])),
        ("sampling_rate", rng.choice([0, 999, 384_001, "fast"])),
        ("return_timestamps", rng.choice(["letters", 3, None])),
        ("language", rng.choice(["xx", 5, "x" * rng.randint(1000, 300_000)])),
    ])
    return [
        ("random bytes as audio", endpoint(rng.randbytes(rng.randint(1, 200_000)))),
        ("truncated WAV", endpoint(wav[: rng.randint(1, len(wav) - 1)])),
        (f"{channels}-channel WAV", endpoint(pcm_wav(frames))),
        ("NaN/Inf in a float WAV", endpoint(float_wav(np.where(np.arange(len(clip)) == bad_position,
                                                                rng.choice([np.nan, np.inf, -np.inf]), clip)))),
        ("JSON nested deep: body", {"url": "/", "content": deep.encode(), "headers": {"Content-Type": "application/json"}}),
        ("JSON nested deep: parameters", {"url": "/", "headers": {"Content-Type": "application/json"}, "content": (
            '{"inputs": "' + base64.b64encode(wav).decode() + '", "parameters": {"language": '
            + "[" * (half := rng.randint(900, 3000)) + "]" * half + "}}").encode()}),
        ("JSON nested deep: inputs", {"url": "/", "content": b'{"inputs": ' + deep.encode() + b"}",
                                      "headers": {"Content-Type": "application/json"}}),
        ("JSON nested deep: multipart parameters", {"url": "/", "files": {"file": ("a.wav", wav, "audio/wav")},
                                                    "data": {"parameters": deep}}),
        ("JSON nested deep: query", {"url": "/?language=" + "[" * rng.randint(1000, 3000), "content": wav,
                                     "headers": {"Content-Type": "audio/wav"}}),
        ("huge integer in an array", endpoint({"array": [0.0] * rng.randint(1, 50) + [int("9" * rng.randint(320, 2000))],
                                               "sampling_rate": 16000})),
        ("special token in prompt", endpoint(wav, {"prompt": f"hello {rng.choice(SPECIAL_TOKENS)} world"})),
        ("huge prompt", endpoint(wav, {"prompt": "word " * rng.randint(500, 600_000)})),
        (f"{parameter} out of range", endpoint(wav, {parameter: value})),
        ("array over the duration limit", endpoint({"array": [0.0] * rng.randint(130_000, 600_000),
                                                    "sampling_rate": rng.choice([1000, 1024])})),
    ]


HEAVY = [  # the heaviest combinations the documented ranges allow
    ("chunk 1 s, batch 256, word", 10, {"chunk_length_s": 1, "batch_size": 256, "return_timestamps": "word"}),
    ("chunked, chunk 1 s, batch 256, word", 10,
     {"long_form": "chunked", "chunk_length_s": 1, "batch_size": 256, "return_timestamps": "word"}),
    ("16 beams + word", 30, {"num_beams": 16, "return_timestamps": "word"}),
    ("16 beams, batch 256", 120, {"num_beams": 16, "batch_size": 256}),
    ("batch 256 + word", 120, {"batch_size": 256, "return_timestamps": "word"}),
    ("chunk 2 s, 16 beams + word", 60, {"chunk_length_s": 2, "num_beams": 16, "return_timestamps": "word"}),
]


def slow_clients(url: str, count: int) -> list[int]:
    """``count`` slowloris connections and ``count`` stalled bodies: the status each one got."""
    host, port = url.removeprefix("http://").split(":")

    def trickle(stalled_body: bool) -> int:
        with socket.create_connection((host, int(port)), timeout=120) as connection:
            if stalled_body:
                connection.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                                   "Content-Type: application/json\r\nContent-Length: 90000\r\n\r\n{".encode())
            else:
                connection.sendall(b"POST / HTTP/1.1\r\n")
                try:
                    for line in range(40):
                        time.sleep(1)
                        connection.sendall(f"X-{line}: 1\r\n".encode())
                except OSError:
                    pass
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
            return int(answer.split(b" ", 2)[1]) if answer else 0

    with ThreadPoolExecutor(2 * count) as pool:
        return list(pool.map(trickle, [False] * count + [True] * count))


def mass_hang_up(url: str, speech_wav: bytes, good_wav: bytes, clients: int) -> float:
    """Seconds from the last of ``clients`` hang-ups (each sending ``speech_wav``) until a good
    request (``good_wav``) is answered 200."""

    def hang_up(_: int) -> None:
        try:
            httpx.post(url + "/", content=speech_wav, headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {KEY}"},
                       params={"language": "en"}, timeout=0.5)
        except httpx.HTTPError:
            pass

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(hang_up, range(clients)))
    gone = time.monotonic()
    while True:
        answer = httpx.post(url + "/", content=good_wav, params={"language": "en"},
                            headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {KEY}"}, timeout=120)
        if answer.status_code == 200:
            return time.monotonic() - gone
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-tiny.en")
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=8765)
    arguments = parser.parse_args(argv)
    from speaker_transcripts.pipeline.audio import decode_file

    rng = random.Random(arguments.seed)
    speech = decode_file((ROOT / "samples" / "two-readers.wav").read_bytes()).samples
    server = Server(arguments.asr_model, arguments.port)
    statuses: dict[str, Counter] = {}
    failures: list[str] = []
    try:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
        client.post("/", content=pcm_wav(speech[:32000]), headers={"Content-Type": "audio/wav"})  # lazy init outside the peaks
        idle = server.rss_mb()
        for _ in range(arguments.variants):
            for kind, request in bad_requests(rng, speech):
                try:
                    status = client.post(**request).status_code
                except httpx.HTTPError as error:
                    status, _ = 0, failures.append(f"{kind}: no answer ({type(error).__name__})")
                statuses.setdefault(kind, Counter())[status] += 1
                if status >= 500 or status == 0:
                    failures.append(f"{kind}: {status}")
        print("stage: heaviest allowed requests", flush=True)
        heavy: list[tuple[str, float, float, int]] = []
        for name, seconds, parameters in HEAVY:
            audio = pcm_wav(np.resize(speech, int(seconds * 16000)))
            started = time.monotonic()
            answer = client.post("/", content=audio, params={"language": "en", **parameters}, headers={"Content-Type": "audio/wav"})
            heavy.append((name, server.peak_since(started) - idle, time.monotonic() - started, answer.status_code))
            if answer.status_code not in (200, 504):  # 504: REQUEST_TIMEOUT_S=60 stopped it, as documented
                failures.append(f"{name}: {answer.status_code}")
        print("stage: slow clients", flush=True)
        slow = slow_clients(server.url, 10)
        print("stage: mass hang-up", flush=True)
        recovery = mass_hang_up(server.url, pcm_wav(np.resize(speech, 60 * 16000)), pcm_wav(speech[:32000]), 20)
        after = client.get("/health").status_code
    finally:
        server.close()

    print(f"idle RSS {idle:.0f} MB; {sum(sum(c.values()) for c in statuses.values())} bad requests in {len(statuses)} kinds\n")
    print("| kind | answers |\n|---|---|")
    for kind, counter in statuses.items():
        print(f"| {kind} | {', '.join(f'{status} x{count}' for status, count in sorted(counter.items()))} |")
    print("\n| heaviest allowed request | peak RSS above the idle server at the probe's start, MB | s | status |\n|---|---|---|---|")
    for name, peak, seconds, status in heavy:
        print(f"| {name} | {peak:.0f} | {seconds:.1f} | {status} |")
    print(f"\nslow clients (10 slowloris, 10 stalled bodies): {dict(Counter(slow))}")
    print(f"20 clients hanging up on 60-s requests: good request answered {recovery:.1f} s after the last; /health {after}")
    print(f"peak RSS over the whole probe: {max(rss for _, rss in server.samples):.0f} MB "
          f"(median {statistics.median(rss for _, rss in server.samples):.0f})")
    for failure in failures:
        print("FAILURE:", failure)
    return 1 if failures or any(status not in (408,) for status in slow) else 0


if __name__ == "__main__":
    sys.exit(main())
