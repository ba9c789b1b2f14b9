"""How a live session's events travel: the ``Transport`` a ``routers.realtime.Connection`` runs over.

The session code is one whatever carries it: a WebSocket (``WebSocketTransport``: events in text
frames, audio in ``input_audio_buffer.append``) or a WebRTC call (``webrtc.CallTransport``: events
on the ``oai-events`` data channel, audio from the call's track as ``Pcm``). A transport sends an
event, receives the next client frame (``None`` once the client is gone) and closes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState


@dataclass(frozen=True)
class Pcm:
    """Audio a transport received outside events: 16-bit mono PCM at the transport's ``media_rate``."""

    samples: bytes


class Transport(Protocol):
    """What a live session needs of its connection to the client."""

    media_rate: int | None  # the rate of ``Pcm`` it delivers; None: audio comes in events only

    @property
    def connected(self) -> bool: ...

    async def send(self, event: dict[str, Any]) -> None:
        """Send one event; raises ``OSError`` (or ``RuntimeError``, ``WebSocketDisconnect``) if the client is gone."""

    async def receive(self) -> str | bytes | Pcm | None:
        """The client's next frame, or None once it is gone."""

    async def close(self, code: int) -> None:
        """End the connection (``code``: a WebSocket close code) unless the client already has."""


class WebSocketTransport:
    """A Starlette WebSocket, accepted."""

    media_rate = None

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket

    @property
    def connected(self) -> bool:
        return self.websocket.client_state == WebSocketState.CONNECTED

    async def send(self, event: dict[str, Any]) -> None:
        await self.websocket.send_json(event)

    async def receive(self) -> str | bytes | None:
        try:
            message = await self.websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return None
        if message["type"] == "websocket.disconnect":
            return None
        return message["text"] if message.get("text") is not None else (message.get("bytes") or b"")

    async def close(self, code: int) -> None:
        if self.connected:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await self.websocket.close(code)
