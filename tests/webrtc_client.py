"""A WebRTC client for the tests and the bench: aiortc, as a browser app opens a call (a microphone
track and the ``oai-events`` data channel), with its candidates on loopback only."""

from __future__ import annotations

import asyncio
import fractions
import json
import time
from collections.abc import Callable

import av
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from speaker_transcripts.server.webrtc import EVENTS_LABEL, restrict_candidates

RATE = 48000
FRAME = 960  # 20 ms, as a browser's Opus encoder takes it


class ClipTrack(MediaStreamTrack):
    """A microphone playing ``samples`` (float32 at 16 kHz) in real time, then silence until stopped."""

    kind = "audio"

    def __init__(self, samples: np.ndarray) -> None:
        super().__init__()
        resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1).astype(np.float32), format="flt", layout="mono")
        frame.sample_rate = 16000
        self.pcm = np.concatenate([out.to_ndarray().reshape(-1) for out in [*resampler.resample(frame), *resampler.resample(None)]])
        self.sent = 0
        self.started: float | None = None

    @property
    def played(self) -> bool:
        return self.sent >= self.pcm.size

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        self.started = self.started or time.monotonic()
        await asyncio.sleep(max(self.started + self.sent / RATE - time.monotonic(), 0.0))
        chunk = self.pcm[self.sent : self.sent + FRAME]
        chunk = np.pad(chunk, (0, FRAME - chunk.size))
        frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1).astype(np.int16), format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = RATE, self.sent, fractions.Fraction(1, RATE)
        self.sent += FRAME
        return frame


class Call:
    """One call: ``open`` posts the offer (``post(sdp) -> (status, answer)``), ``events`` are what came on the channel."""

    def __init__(self, track: MediaStreamTrack | None = None, channel: bool = True) -> None:
        self.peer = RTCPeerConnection()
        self.events: list[dict] = []
        self.arrived = asyncio.Event()
        if track is not None:
            self.peer.addTrack(track)
        self.channel = self.peer.createDataChannel(EVENTS_LABEL) if channel else None
        if self.channel is not None:
            self.channel.on("message", self._on_message)
        self.opened = asyncio.Event()
        if self.channel is not None:
            self.channel.on("open", self.opened.set)

    def _on_message(self, message: str) -> None:
        self.events.append(json.loads(message))
        self.arrived.set()

    async def offer(self) -> str:
        restrict_candidates(self.peer, ["127.0.0.1"], None)
        await self.peer.setLocalDescription(await self.peer.createOffer())
        return self.peer.localDescription.sdp

    async def answer(self, sdp: str) -> None:
        await self.peer.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))

    def send(self, event: dict) -> None:
        assert self.channel is not None
        self.channel.send(json.dumps(event))

    async def until(self, done: Callable[[list[dict]], bool], guard_s: float = 120.0) -> list[dict]:
        """The events once ``done(events)`` holds (the guard turns a hang into a failure that says what came)."""
        try:
            async with asyncio.timeout(guard_s):
                while not done(self.events):
                    self.arrived.clear()
                    await self.arrived.wait()
        except TimeoutError:
            raise AssertionError(f"timed out after {[(e['type'], e.get('error')) for e in self.events]}") from None
        return self.events

    def count(self, kind: str) -> int:
        return sum(event["type"] == kind for event in self.events)

    async def hang_up(self) -> None:
        await self.peer.close()
