"""The live route (``GET /v1/realtime``) under hostile and clumsy clients: floods of events that are not
audio, a fast client that answers pings, frames that keep a session busy without audio, deeply nested
JSON, odd model names and loose values. Each function draws its own variants and returns rows for the
probe's table plus the failures it saw."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import time
from typing import Any

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedOK, WebSocketException

from probes.server import KEY, Server

RATE = 16000
MAX_PENDING_GROWTH_MB = 300  # a session's pending events may cost this much of the server's memory, whatever they are
MAX_LEFT_BEHIND_MB = 100  # and this much may stay once the client has left


def _url(server: Server) -> str:
    return server.url.replace("http://", "ws://") + "/v1/realtime?intent=transcription"


def _update(transcription: dict[str, Any], rate: Any = RATE) -> str:
    return json.dumps({"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": rate}, "transcription": transcription}}}})


def _append(pcm: bytes) -> str:
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()})


async def _events(socket: Any, seconds: float) -> list[dict[str, Any]]:
    """What the server sent within ``seconds`` (or until it closed)."""
    received = []
    try:
        async with asyncio.timeout(seconds):
            async for message in socket:
                received.append(json.loads(message))
    except TimeoutError:
        pass
    return received


def pending_event_floods(server: Server, rng: random.Random, clip: bytes) -> tuple[list[tuple], list[str]]:
    """``session.update`` frames carrying a known speaker's clip, and ones with a prompt near the frame limit,
    sent in a loop for 20 s each (with 0.1 s of silence after each, so the session stays active): the
    server's memory while they come and after the client left."""
    rows, failures = [], []
    clip_text = base64.b64encode(clip).decode()
    quiet = _append(bytes(RATE // 10 * 2))
    floods = {
        "session.update with a known speaker's clip": lambda: _update({"model": "whisper-1", "known_speakers": [
            {"name": f"Ann {rng.randint(0, 999)}", "audio": clip_text}]}),
        "session.update with a 900-kB prompt": lambda: _update({"model": "whisper-1", "prompt": "word " * rng.randint(170_000, 180_000)}),
    }
    for what, frame in floods.items():
        idle = server.rss_mb()
        started = time.monotonic()

        async def flood(frame: Any = frame) -> int:
            sent = 0
            async with connect(_url(server), additional_headers={"Authorization": f"Bearer {KEY}"}, max_size=None,
                               compression=None, open_timeout=60) as socket:
                reading = asyncio.create_task(_events(socket, 30))  # a client that never reads is dropped, by design
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    try:
                        async with asyncio.timeout(max(deadline - time.monotonic(), 0.01)):
                            await socket.send(frame())
                            await socket.send(quiet)  # audio, so the session is not closed as idle meanwhile
                        sent += 1
                    except TimeoutError:
                        break  # the server stopped reading: the client is held back, as it should be
                reading.cancel()
            return sent

        sent = asyncio.run(flood())
        peak = server.peak_since(started) - idle
        time.sleep(5)
        left = server.rss_mb() - idle
        rows.append((what, sent, round(peak), round(left)))
        if peak > MAX_PENDING_GROWTH_MB or left > MAX_LEFT_BEHIND_MB:
            failures.append(f"live, {what}: +{peak:.0f} MB while it came, +{left:.0f} MB after the client left")
    return rows, failures


def fast_client_answering_pings(server: Server, speech: np.ndarray) -> tuple[list[tuple], list[str]]:
    """40 s of speech sent as fast as the socket takes it by a client whose library answers pings: it is
    slowed by TCP and gets its transcript, never dropped."""
    pcm = (np.clip(np.resize(speech, 40 * RATE), -1, 1) * 32767).astype("<i2").tobytes()

    async def session() -> tuple[float, list[str], Any]:
        started = time.monotonic()
        async with connect(_url(server), additional_headers={"Authorization": f"Bearer {KEY}"}, compression=None,
                           ping_interval=5, ping_timeout=10, open_timeout=60) as socket:
            await socket.send(_update({"model": "whisper-1", "language": "en", "diarize": False}))
            for start in range(0, len(pcm), 3200):
                await socket.send(_append(pcm[start : start + 3200]))
            await socket.send(json.dumps({"type": "input_audio_buffer.commit"}))
            kinds: list[str] = []
            last = time.monotonic()
            with contextlib.suppress(TimeoutError, ConnectionClosedOK):
                while True:  # until the server has said nothing for 30 s, or closed the session as idle once all was said
                    async with asyncio.timeout(30):
                        kinds.append(json.loads(await socket.recv())["type"])
                        last = time.monotonic()
            return last - started, kinds, socket.close_code

    try:
        seconds, kinds, closed = asyncio.run(session())
    except (WebSocketException, OSError, TimeoutError) as error:  # a dropped connection is what this class looks for
        dropped = f"dropped: {type(error).__name__}: {error}"
        return [("40 s of audio at socket speed, pings answered", dropped)], [f"live, a fast client answering pings: {dropped}"]
    completed = sum(kind.endswith(".completed") for kind in kinds)
    words = sum(kind.endswith(".delta") for kind in kinds)
    row = ("40 s of audio at socket speed, pings answered",
           f"{completed} turn(s) completed, {words} deltas, the last event after {seconds:.0f} s; closed: {closed or 'no'}")
    return [row], [] if completed and closed in (None, 1000) else [f"live, a fast client answering pings: {row[1]}"]


def busy_without_audio(server: Server, idle_timeout_s: float) -> tuple[list[tuple], list[str]]:
    """Frames that are not audio (malformed text, empty appends), one a second: the session is closed as
    idle after the server's idle timeout all the same."""
    frames = ["x", "{}", json.dumps({"type": "input_audio_buffer.append", "audio": ""}), "[" * 50]

    async def session() -> tuple[float, list[str]]:
        started = time.monotonic()
        kinds: list[str] = []
        async with connect(_url(server), additional_headers={"Authorization": f"Bearer {KEY}"}, open_timeout=60) as socket:
            try:
                for index in range(int(idle_timeout_s * 4)):
                    await socket.send(frames[index % len(frames)])
                    kinds += [event.get("error", {}).get("code") or event["type"] for event in await _events(socket, 1.0)]
            except WebSocketException:  # the server closed the session
                kinds += [event.get("error", {}).get("code") or event["type"] for event in await _events(socket, 1.0)]
        return time.monotonic() - started, kinds

    seconds, kinds = asyncio.run(session())
    ended = "session_idle" in kinds
    outcome = f"{'closed as idle' if ended else 'still open'} after {seconds:.0f} s (LIVE_IDLE_TIMEOUT_S={idle_timeout_s:g})"
    row = ("a frame without audio every second", outcome)
    return [row], [] if ended and seconds < idle_timeout_s * 3 else [f"live, frames without audio: {row[1]}"]


def malformed_events(server: Server, rng: random.Random) -> tuple[list[tuple], list[str]]:
    """Deeply nested JSON, a model name with control characters or of 900 kB, loose values: each an
    ``error`` event, and the session goes on (a good update is answered after them)."""
    depth = rng.randint(20_000, 100_000)
    cases = {
        f"JSON nested {depth} deep": "[" * depth + "]" * depth,
        "model with control characters": _update({"model": "whisper-1\r\nX-Injected: 1"}),
        "model of 900 kB": _update({"model": "m" * 900_000}),
        "rate 16000.0": _update({"model": "whisper-1"}, rate=16000.0),
        'diarize "yes"': _update({"model": "whisper-1", "diarize": "yes"}),
    }
    rows, failures = [], []

    async def session(frame: str) -> list[dict[str, Any]]:
        async with connect(_url(server), additional_headers={"Authorization": f"Bearer {KEY}"}, max_size=None, open_timeout=60) as socket:
            await socket.send(frame)
            await socket.send(_update({"model": "whisper-1"}))
            received = []
            async with asyncio.timeout(60):
                async for message in socket:
                    received.append(json.loads(message))
                    if received[-1]["type"] == "session.updated":
                        break
            return received

    for what, frame in cases.items():
        try:
            received = asyncio.run(session(frame))
        except (WebSocketException, OSError, TimeoutError) as error:
            received = [{"type": f"connection lost: {type(error).__name__}"}]
        errors = [event["error"].get("code") for event in received if event["type"] == "error"]
        answered = received[-1]["type"] == "session.updated"
        rows.append((what, ", ".join(map(str, errors)) or "no error event", "yes" if answered else "no"))
        if not errors or not answered:
            failures.append(f"live, {what}: error events {errors}, session went on: {answered}")
    return rows, failures
