"""WebRTC calls on aiortc: an SDP offer answered, the call's microphone and ``oai-events`` as a ``Transport``.

The browser's Opus track is decoded by aiortc and resampled here to 16-kHz mono PCM (``Pcm``, 100 ms
at a time, as the page's WebSocket sends it); the data channel carries the WebSocket route's events
both ways. The session is ``routers.realtime.Connection``, as on the WebSocket. Media is received on
host candidates only (no STUN, no TURN): the addresses in ``WEBRTC_HOSTS`` (unset: aioice's choice,
every interface but loopback) and ports in ``WEBRTC_PORTS`` (aioice binds any free port, so
``restrict_candidates`` gathers the host candidates itself). A call whose peer hangs up, fails ICE
or vanishes (consent checks stop being answered) ends as a closed WebSocket does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
from collections.abc import Sequence
from typing import Any

import av
from aioice.candidate import Candidate, candidate_foundation, candidate_priority
from aioice.ice import Connection as IceConnection
from aioice.ice import StunProtocol
from aiortc import MediaStreamTrack, RTCDataChannel, RTCPeerConnection
from aiortc.mediastreams import MediaStreamError

from speaker_transcripts.server.realtime_transport import Pcm

EVENTS_LABEL = "oai-events"  # OpenAI's data channel for Realtime events
MEDIA_RATE = 16000  # what the call's audio is resampled to (Whisper's rate: the session resamples no further)
CHUNK_S = 0.1  # audio handed to the session at a time
MAX_PENDING_MESSAGES = 256  # data-channel messages received, not yet read: a peer past this is dropped
# What the answer asks of the browser's Opus encoder: about 80 kbit/s on the wire instead of Chromium's 40 (conv03,
# one run each: final WER 14.9 % against 20.3 % in three runs at the default; docs/live.md has the bench).
OPUS_MAX_BITRATE = 96_000
MAX_BUFFERED_BYTES = 1 << 20  # events sent, not yet taken by SCTP: sending waits (the session's write timeout applies)


class NoPortFree(OSError):
    """Every port of ``WEBRTC_PORTS`` is taken on some address."""


class CallTransport:
    """One call as a live session's ``Transport``: frames in the order they arrived (events from the
    data channel, ``Pcm`` from the track), ``None`` once the peer is gone; audio past ``max_backlog_s``
    waiting to be read is dropped (a call's audio cannot be slowed as a socket's can)."""

    media_rate = MEDIA_RATE

    def __init__(self, peer: RTCPeerConnection, max_frame_bytes: int, max_backlog_s: float) -> None:
        self.peer = peer
        self.channel: RTCDataChannel | None = None
        self.frames: asyncio.Queue[str | bytes | Pcm | None] = asyncio.Queue()
        self.max_frame_bytes = max_frame_bytes
        self.max_pending_bytes = int(max_backlog_s * MEDIA_RATE * 2)
        self.pending_bytes = 0  # audio queued, not yet read
        self.dropped_s = 0.0
        self.gone = False
        self.opened = asyncio.Event()  # the data channel opened (or the call connected without one)
        self.pump: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return not self.gone and self.channel is not None and self.channel.readyState == "open"

    def attach(self, channel: RTCDataChannel) -> None:
        """The peer's ``oai-events`` channel: its messages are read in order, its close ends the call."""
        self.channel = channel

        @channel.on("message")
        def on_message(message: str | bytes) -> None:
            if len(message) > self.max_frame_bytes or self.frames.qsize() >= MAX_PENDING_MESSAGES:
                self.end()  # as a WebSocket frame over LIVE_MAX_FRAME_KB closes its session
            else:
                self.frames.put_nowait(message)

        channel.on("close", self.end)
        if channel.readyState == "open":
            self.opened.set()
        channel.on("open", self.opened.set)

    def listen(self, track: MediaStreamTrack) -> None:
        """The peer's microphone, read until it ends."""
        self.pump = asyncio.ensure_future(self._pump(track))

    async def _pump(self, track: MediaStreamTrack) -> None:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=MEDIA_RATE)
        chunk, size = bytearray(), int(CHUNK_S * MEDIA_RATE) * 2
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                break
            frame.pts = None  # lost packets leave gaps in the timestamps: the audio is taken as it comes
            for out in resampler.resample(frame):
                chunk += out.to_ndarray().tobytes()
            if len(chunk) >= size:
                self._queue_audio(bytes(chunk))
                chunk.clear()
        self.end()

    def _queue_audio(self, pcm: bytes) -> None:
        if self.pending_bytes + len(pcm) > self.max_pending_bytes:
            self.dropped_s += len(pcm) / 2 / MEDIA_RATE
            return
        self.pending_bytes += len(pcm)
        self.frames.put_nowait(Pcm(pcm))

    def end(self) -> None:
        """The peer is gone (hung up, failed ICE, vanished, or broke a limit): the reader is told."""
        if not self.gone:
            self.gone = True
            self.opened.set()
            self.frames.put_nowait(None)

    async def send(self, event: dict[str, Any]) -> None:
        if not self.connected or self.channel is None:
            raise ConnectionError("the call has ended")
        while self.channel.bufferedAmount > MAX_BUFFERED_BYTES:  # a peer that stops reading: the write timeout ends it
            await asyncio.sleep(0.05)
            if not self.connected:
                raise ConnectionError("the call has ended")
        self.channel.send(json.dumps(event, separators=(",", ":"), ensure_ascii=False))

    async def receive(self) -> str | bytes | Pcm | None:
        if self.gone and self.frames.empty():
            return None
        frame = await self.frames.get()
        if isinstance(frame, Pcm):
            self.pending_bytes -= len(frame.samples)
        elif frame is None:
            self.frames.put_nowait(None)  # every later read says gone too
        return frame

    async def close(self, code: int) -> None:
        """Hang up (``code`` is a WebSocket's; a call has none)."""
        self.end()
        if self.pump is not None:
            self.pump.cancel()
        with contextlib.suppress(Exception):  # a peer connection half torn down by its peer may raise anything here
            await self.peer.close()


def without_mdns_candidates(sdp: str) -> str:
    """The offer without its ``.local`` candidates: resolving them would send multicast DNS from the server.
    The browser's checks reach the answer's candidates all the same (aioice learns its address from them)."""
    def mdns(line: str) -> bool:
        fields = line.split()
        return line.startswith("a=candidate:") and len(fields) > 4 and fields[4].lower().endswith(".local")

    return "".join(line for line in sdp.splitlines(keepends=True) if not mdns(line))


def with_opus_bitrate(sdp: str, bits_s: int) -> str:
    """The answer asking the browser's Opus encoder for up to ``bits_s`` (``maxaveragebitrate``; Chromium
    sends mono speech at about 32 kbit/s without it); aiortc's answer has no ``a=fmtp`` line for Opus."""
    payloads = set(re.findall(r"^a=rtpmap:(\d+) opus/48000", sdp, re.MULTILINE))
    lines = []
    for line in sdp.split("\r\n"):
        lines.append(line)
        if any(line.startswith(f"a=rtpmap:{p} ") for p in payloads):
            lines.append(f"a=fmtp:{line.split()[0].removeprefix('a=rtpmap:')} maxaveragebitrate={bits_s}")
    return "\r\n".join(lines)


def restrict_candidates(peer: RTCPeerConnection, hosts: Sequence[str], ports: tuple[int, int] | None) -> None:
    """Make ``peer`` gather host candidates on ``hosts`` (empty: aioice's addresses) and in ``ports``
    (None: any); call after the transports exist (``setRemoteDescription``, or ``addTrack`` and
    ``createDataChannel`` for an offer), before ``setLocalDescription`` gathers."""
    transports = [transceiver.receiver.transport for transceiver in peer.getTransceivers()]
    if peer.sctp is not None:
        transports.append(peer.sctp.transport)
    for dtls in transports:
        ice = dtls.transport.iceGatherer._connection  # aiortc keeps aioice's Connection private; no public hook exists

        async def gather(component: int, addresses: list[str], timeout: int = 5, ice: IceConnection = ice) -> list[Candidate]:
            return await _host_candidates(ice, component, list(hosts) or addresses, ports)

        ice.get_component_candidates = gather


async def _host_candidates(ice: IceConnection, component: int, addresses: list[str], ports: tuple[int, int] | None) -> list[Candidate]:
    """Host candidates only (what aioice gathers without STUN or TURN servers), each on a port of ``ports``."""
    loop = asyncio.get_running_loop()
    candidates = []
    for address in addresses:
        tries = [0] if ports is None else _shuffled_range(*ports)
        for port in tries:
            try:
                _, protocol = await loop.create_datagram_endpoint(lambda: StunProtocol(ice), local_addr=(address, port))
                break
            except OSError:
                continue
        else:
            raise NoPortFree(f"no UDP port of WEBRTC_PORTS {ports[0]}-{ports[1]} is free on {address}")  # type: ignore[index]
        host, bound = protocol.transport.get_extra_info("sockname")[:2]
        protocol.local_candidate = Candidate(foundation=candidate_foundation("host", "udp", host), component=component,
                                             transport="udp", priority=candidate_priority(component, "host"),
                                             host=host, port=bound, type="host")
        ice._protocols.append(protocol)
        candidates.append(protocol.local_candidate)
    return candidates


def _shuffled_range(first: int, last: int) -> list[int]:
    """The range from a random start, so concurrent calls do not all try the same ports first."""
    start = random.randint(first, last)
    return [*range(start, last + 1), *range(first, start)]
