"""Requests over HTTP: bad and heavy bodies of every kind, decoder bombs, answers that amplify the
request, client text in headers, long speaker names in subtitles."""

from __future__ import annotations

import base64
import json
import random
import re
import time
from typing import Any

import httpx
import numpy as np

from probes.server import MAX_HEALTH_S, HealthWatch
from tests.audio_files import float_wav, pcm_wav, stills_beside_audio, streamed_wav

SPECIAL_TOKENS = ("<|endoftext|>", "<|0.00|>", "<|startoftranscript|>", "<|notimestamps|>", "<|en|>")

MAX_ERROR_BYTES = 64 * 1024  # an error answer larger than this amplifies the request


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


def decoder_bombs(rng: random.Random, speech: np.ndarray) -> list[tuple[str, bytes]]:
    """Files that are small but would decode to far more than they look."""
    rate = rng.randint(1, 9)
    low = pcm_wav(np.resize(speech, rng.randint(2000, 40000)), rate)
    streamed = streamed_wav(np.resize(speech, 16000 * rng.randint(130, 150)))
    size, count = rng.randint(5000, 9000), rng.randint(2, 4)
    stills = stills_beside_audio(size, count, speech[:16000])
    return [(f"WAV declaring {rate} Hz", low), ("streamed WAV, no length, 130-150 s", streamed),
            (f"{count} still images {size}x{size} beside 1 s of audio", stills)]


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
