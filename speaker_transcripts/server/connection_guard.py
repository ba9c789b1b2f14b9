"""Connection limits Uvicorn lacks: a deadline for request headers and a cap on open
connections, so slow or stalled clients (slowloris) cannot hold the server.

Uvicorn times out only idle keep-alive connections. A client that sends one header line every
few seconds, or declares a body and then stalls, holds its connection (and, for a body, a
request task) forever; enough of them exhaust file descriptors and memory. Here:

- ``GuardedHttpToolsProtocol`` (Uvicorn's httptools protocol, which ``uvicorn[standard]``
  uses) gives each request ``header_timeout_s`` from its first byte, or from the connection's
  opening, to finish its headers, and answers 408 and closes otherwise; and it answers 503 and
  closes a connection beyond ``max_connections`` at once, before reading anything.

Bodies get their read timeouts in the app (``middleware.BodyReadTimeout``), so they hold under
any server. ``speaker-transcripts serve`` runs Uvicorn with this protocol (``guarded_config``);
plain ``uvicorn speaker_transcripts.server.app:app`` has the body timeouts but neither the header
deadline nor the cap.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from speaker_transcripts.config import ServerSettings

logger = logging.getLogger("speaker_transcripts.server")


@dataclass(frozen=True)
class ConnectionLimits:
    """What the protocol enforces (``HEADER_TIMEOUT_S``, ``MAX_CONNECTIONS``)."""

    header_timeout_s: float = 10.0
    max_connections: int = 256


@functools.cache
def limits_from_environment() -> ConnectionLimits:
    """The limits ``HEADER_TIMEOUT_S`` and ``MAX_CONNECTIONS`` set (read once per process), for
    ``uvicorn speaker_transcripts.server.app:app --http speaker_transcripts.server.connection_guard:GuardedHttpToolsProtocol``."""
    settings = ServerSettings()
    return ConnectionLimits(header_timeout_s=settings.header_timeout_s, max_connections=settings.max_connections)


def _refusal(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """Uvicorn's httptools protocol with a header deadline and a connection cap (``limits``)."""

    def __init__(self, *args: Any, limits: ConnectionLimits | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits or limits_from_environment()
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            logger.warning("refused a connection: %d open (MAX_CONNECTIONS)", len(self.connections) - 1)
            transport.write(_refusal(503, "Service Unavailable", "too many open connections; retry later"))
            transport.close()
            return
        self._arm_header_deadline()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_deadline()  # a keep-alive connection's next request gets its own deadline

    def on_headers_complete(self) -> None:
        self._disarm_header_deadline()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def timeout_keep_alive_handler(self) -> None:
        self._disarm_header_deadline()
        super().timeout_keep_alive_handler()

    def _arm_header_deadline(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being served: its headers were complete
        message = f"the request headers took longer than {self.limits.header_timeout_s:g} s (HEADER_TIMEOUT_S)"
        self.transport.write(_refusal(408, "Request Timeout", message))
        self.transport.close()


def guarded_config(asgi_app: Any, settings: ServerSettings | None = None, **options: Any) -> uvicorn.Config:
    """Uvicorn's config with this guard: the header deadline and the connection cap from
    ``settings``; ``options`` are Uvicorn's (host, port, log_level)."""
    settings = settings or ServerSettings()
    limits = ConnectionLimits(header_timeout_s=settings.header_timeout_s, max_connections=settings.max_connections)
    return uvicorn.Config(asgi_app, http=functools.partial(GuardedHttpToolsProtocol, limits=limits), **options)
