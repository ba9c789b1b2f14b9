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
the queue is empty and a good request is answered). Round three adds: connections that send a
body no route reads and then drip (at the connection cap, while ``/health`` is timed), request
heads of random sizes up to 64 MB, ``Expect: 100-continue`` over the upload limit, files that
declare a rate of a few Hz, streamed WAVs with no length, still-image video streams beside the
audio (peak RSS above idle for each), a damaged model cache (refused with the index unreachable,
pulled again with it), and the mass hang-up again on a second server that diarizes with the
embedded pipeline. Round four (``bench/probe_round_four.py``) adds: small bodies whose parameters
hold very long lists (the answer's size, the time, ``/health`` meanwhile), the OpenAI form's
``model`` with text no header may carry, known speakers with 36-64-character names in subtitles
(no word split), a third server on the documented defaults (95-MB samples array, many-channel 8-bit
WAV, WAV of silence, 17 concurrent 95-MB uploads; peak RSS against bounds derived from the
settings), and the batch command over hundreds of tiny files with a FIFO, a name with a newline,
a symlink loop under a glob and a self-naming manifest, a second job started on the same ``--out``.
Prints a table; exits 1 on any 500, a request that got no answer, a lock-out, garbage served from a
damaged cache, or a round-four class that does not hold.
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
from tests.audio_files import float_wav, pcm_wav, stills_beside_audio, streamed_wav

sys.path.insert(0, str(ROOT / "bench"))
from probe_round_four import (
    HealthWatch,
    amplifying_errors,
    client_text_in_headers,
    defaults_memory,
    long_names_in_subtitles,
    odd_corpus,
)

KEY = "probe-key-not-secret"
MAX_CONNECTIONS = 32  # above the 20 slow clients of the slowloris stage; the lock-out stage fills it
SPECIAL_TOKENS = ("<|endoftext|>", "<|0.00|>", "<|startoftranscript|>", "<|notimestamps|>", "<|en|>")


class Server:
    """``speaker-transcripts serve`` in a subprocess, with its RSS sampled in a thread."""

    def __init__(self, asr_model: str, port: int, **overrides: str) -> None:
        environment = {**os.environ, "ASR_MODEL": asr_model, "DIARIZATION_MODEL": "none", "API_KEY": KEY,
                       "MAX_UPLOAD_MB": "5", "MAX_AUDIO_SECONDS": "120", "MAX_QUEUE": "4", "REQUEST_TIMEOUT_S": "60",
                       "MAX_CONNECTIONS": str(MAX_CONNECTIONS), "WRITE_TIMEOUT_S": "5", **overrides}
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
            try:
                while chunk := connection.recv(65536):
                    answer += chunk
            except ConnectionResetError:  # closed with our unread bytes still queued: the answer may have come first
                pass
            return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0

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


def lock_out(url: str, rng: random.Random) -> tuple[float, int]:
    """``MAX_CONNECTIONS`` clients each send a random request whose body no route reads, then drip
    a byte every 0.5 s for 20 s. Returns the slowest ``/health`` answer seen meanwhile (seconds;
    inf when one got no 200) and how many attackers were still connected at the end."""
    host, port = url.removeprefix("http://").split(":")
    heads = [
        b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\nx" % rng.randint(2, 10**6),
        b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx" % rng.randint(10**6, 10**12),
        b"PUT /ready HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx" % rng.randint(10**3, 10**9),
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx" % rng.randint(10**3, 10**6),  # no key: 401
        b"DELETE /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\nx",
    ]
    stop = threading.Event()

    def attack(_: int) -> bool:
        with socket.create_connection((host, int(port)), timeout=1) as connection:
            connection.sendall(rng.choice(heads))
            while not stop.wait(0.5):
                try:
                    connection.sendall(b"x")
                    connection.recv(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    pass
                except OSError:
                    return False  # closed by the server
            return True

    with ThreadPoolExecutor(MAX_CONNECTIONS) as pool:
        attackers = [pool.submit(attack, index) for index in range(MAX_CONNECTIONS)]
        with HealthWatch(url) as watch:
            time.sleep(20)
        stop.set()
        return watch.slowest, sum(attacker.result() for attacker in attackers)


def oversized_heads(url: str, rng: random.Random, server: Server) -> list[tuple[str, int, float]]:
    """Request lines and headers of random sizes from 40 kB to 64 MB: (what, status, peak RSS above before)."""
    host, port = url.removeprefix("http://").split(":")
    results = []
    for where in ("URL", "header", "many headers"):
        size = rng.choice([40_000, 1_000_000, 64_000_000])
        if where == "URL":
            head = b"GET /" + b"a" * size
        elif where == "header":
            head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * size
        else:
            head = b"GET / HTTP/1.1\r\n" + b"X-H: v\r\n" * (size // 8)
        started = time.monotonic()
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            try:
                connection.sendall(head)
            except OSError:
                pass  # refused before we finished sending
            answer = b""
            try:
                while chunk := connection.recv(65536):
                    answer += chunk
            except OSError:
                pass
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
        results.append((f"{where}, {size / 1e6:g} MB", status, server.peak_since(started) - server.rss_mb()))
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: audio/wav\r\n"
                           f"Content-Length: {rng.randint(6, 900) * 10**6}\r\nExpect: 100-continue\r\n\r\n".encode())
        first = connection.recv(65536)
    results.append(("Expect: 100-continue over the limit", int(first.split(b" ", 2)[1]), 0.0))
    return results


def decoder_bombs(rng: random.Random, speech: np.ndarray) -> list[tuple[str, bytes]]:
    """Files that are small but would decode to far more than they look."""
    rate = rng.randint(1, 9)
    low = pcm_wav(np.resize(speech, rng.randint(2000, 40000)), rate)
    streamed = streamed_wav(np.resize(speech, 16000 * rng.randint(130, 150)))
    size, count = rng.randint(5000, 9000), rng.randint(2, 4)
    stills = stills_beside_audio(size, count, speech[:16000])
    return [(f"WAV declaring {rate} Hz", low), ("streamed WAV, no length, 130-150 s", streamed),
            (f"{count} still images {size}x{size} beside 1 s of audio", stills)]


def damaged_cache(asr_model: str, port: int, speech: np.ndarray) -> list[tuple[str, str]]:
    """A copy of the model cache with one bit flipped in the weights: the server must refuse to
    start when the index is unreachable, and pull again and answer correctly when it is."""
    import shutil
    import tempfile

    from speaker_transcripts.models.registry import REGISTRY, cache_dir, pull

    pull(REGISTRY[asr_model])
    outcomes = []
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(scratch) / "models"
        shutil.copytree(cache_dir() / asr_model, cache / asr_model)
        weights = next((cache / asr_model).glob("*.safetensors"))
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0x10
        weights.write_bytes(bytes(data))
        environment = {**os.environ, "ASR_MODEL": asr_model, "DIARIZATION_MODEL": "none", "EMBEDDED_MODELS_DIR": str(cache),
                       "PIP_NO_INDEX": "1"}
        refused = subprocess.run([sys.executable, "-m", "speaker_transcripts", "serve", "--port", str(port)], check=False, cwd=ROOT,
                                 env=environment, capture_output=True, text=True, timeout=300)
        lines = [line for line in refused.stderr.splitlines() if "damaged" in line]
        outcomes.append(("index unreachable", f"exit {refused.returncode}; {lines[0][:120] if lines else 'no damage message'}"))
        server = Server(asr_model, port, EMBEDDED_MODELS_DIR=str(cache))
        try:
            answer = httpx.post(server.url + "/", content=pcm_wav(speech[:44800]), params={"language": "en"},
                                headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {KEY}"}, timeout=120)
            text = answer.json().get("text", "") if answer.status_code == 200 else ""
        finally:
            server.close()
        outcomes.append(("index reachable", f"{answer.status_code}: {text.strip()[:60]!r}"))
    return outcomes


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
        print("stage: lock-out", flush=True)
        slowest_health, still_connected = lock_out(server.url, rng)
        if slowest_health > 5 or still_connected:
            failures.append(f"lock-out: slowest /health {slowest_health:.1f} s, {still_connected} attackers still connected")
        print("stage: oversized heads", flush=True)
        heads = oversized_heads(server.url, rng, server)
        failures += [f"{what}: {status}" for what, status, _ in heads if status not in (413, 431)]
        print("stage: decoder bombs", flush=True)
        bombs = []
        for kind, data in decoder_bombs(rng, speech):
            started = time.monotonic()
            answer = client.post("/", content=data, params={"language": "en"}, headers={"Content-Type": "audio/wav"})
            bombs.append((kind, len(data), answer.status_code, server.peak_since(started) - idle))
            if answer.status_code >= 500:
                failures.append(f"{kind}: {answer.status_code}")
        print("stage: answers that amplify the request", flush=True)
        amplifying, found = amplifying_errors(server.url, KEY, rng, server, max_upload_mb=5)
        failures += found
        print("stage: client text in headers", flush=True)
        headers_rows, found = client_text_in_headers(server.url, KEY, rng, pcm_wav(speech[:32000]))
        failures += found
    finally:
        server.close()
    print("stage: long speaker names in subtitles, mass hang-up with diarization", flush=True)
    diarizing = Server(arguments.asr_model, arguments.port, DIARIZATION_MODEL="pyannote-campplus", REQUEST_TIMEOUT_S="30")
    try:
        enrolment = (ROOT / "samples" / "enrolment" / "reader-b.wav").read_bytes()
        long_names, found = long_names_in_subtitles(diarizing.url, KEY, rng, pcm_wav(speech), enrolment)
        failures += found
        recovery_diarizing = mass_hang_up(diarizing.url, pcm_wav(np.resize(speech, 60 * 16000)), pcm_wav(speech[:32000]), 20)
    finally:
        diarizing.close()
    print("stage: memory on the documented defaults", flush=True)
    defaults, found, bounds = defaults_memory(lambda **overrides: Server(arguments.asr_model, arguments.port, **overrides), KEY, speech, rng)
    failures += found
    print("stage: a batch job over an odd corpus", flush=True)
    corpus, found = odd_corpus(arguments.asr_model, rng, speech)
    failures += found
    print("stage: damaged cache", flush=True)
    cache = damaged_cache(arguments.asr_model, arguments.port, speech)
    if not cache[0][1].startswith("exit ") or cache[0][1].startswith("exit 0") or "damaged" not in cache[0][1]:
        failures.append(f"damaged cache, index unreachable: {cache[0][1]}")
    if "go forward" not in cache[1][1].lower():
        failures.append(f"damaged cache, index reachable: {cache[1][1]}")

    print(f"idle RSS {idle:.0f} MB; {sum(sum(c.values()) for c in statuses.values())} bad requests in {len(statuses)} kinds\n")
    print("| kind | answers |\n|---|---|")
    for kind, counter in statuses.items():
        print(f"| {kind} | {', '.join(f'{status} x{count}' for status, count in sorted(counter.items()))} |")
    print("\n| heaviest allowed request | peak RSS above the idle server at the probe's start, MB | s | status |\n|---|---|---|---|")
    for name, peak, seconds, status in heavy:
        print(f"| {name} | {peak:.0f} | {seconds:.1f} | {status} |")
    print(f"\nslow clients (10 slowloris, 10 stalled bodies): {dict(Counter(slow))}")
    print(f"20 clients hanging up on 60-s requests: good request answered {recovery:.1f} s after the last; /health {after}")
    print(f"20 hang-ups on a diarizing server (REQUEST_TIMEOUT_S=30): good request answered {recovery_diarizing:.1f} s after the last")
    print(f"lock-out: {MAX_CONNECTIONS} connections dripping unread bodies for 20 s; slowest /health {slowest_health:.2f} s; "
          f"{still_connected} still connected at the end")
    print("\n| oversized head | status | peak RSS above idle, MB |\n|---|---|---|")
    for what, status, peak in heads:
        print(f"| {what} | {status} | {peak:.0f} |")
    print("\n| decoder bomb | bytes | status | peak RSS above idle, MB |\n|---|---|---|---|")
    for kind, size, status, peak in bombs:
        print(f"| {kind} | {size} | {status} | {peak:.0f} |")
    print("\n| damaged cache | outcome |\n|---|---|")
    for case, outcome in cache:
        print(f"| {case} | {outcome} |")
    print("\n| amplifying error | body MB | status | answer kB | s | slowest /health s | peak RSS above before, MB |\n|---|---|---|---|---|---|---|")
    for kind, size, status, answer_kb, seconds, health, peak in amplifying:
        print(f"| {kind} | {size:.1f} | {status} | {answer_kb:.1f} | {seconds:.1f} | {health:.2f} | {peak:.0f} |")
    print("\n| `model` field | status | header injected |\n|---|---|---|")
    for what, status, injected in headers_rows:
        print(f"| {what} | {status} | {injected} |")
    print("\n| known speaker's name, characters | words | words split in SRT cues |\n|---|---|---|")
    for length, words, split in long_names:
        print(f"| {length} | {words} | {split} |")
    print(f"\n| documented defaults (bounds derived from the settings: {bounds}) | status | peak RSS above idle, MB | slowest /health s |\n|---|---|---|---|")
    for what, status, peak, health in defaults:
        print(f"| {what} | {status} | {peak:.0f} | {health:.2f} |")
    print("\n| batch over an odd corpus | outcome |\n|---|---|")
    for what, outcome in corpus:
        print(f"| {what} | {outcome} |")
    print(f"peak RSS over the whole probe: {max(rss for _, rss in server.samples):.0f} MB "
          f"(median {statistics.median(rss for _, rss in server.samples):.0f})")
    for failure in failures:
        print("FAILURE:", failure)
    # 408: the deadline; 503: a stalled upload beyond what the queue admits is refused before its body is read
    return 1 if failures or any(status not in (408, 503) for status in slow) else 0


if __name__ == "__main__":
    sys.exit(main())
