"""Connection limits Uvicorn lacks, so that no client, authenticated or not, can hold a connection.

Uvicorn times out only idle keep-alive connections, and any byte that arrives cancels that timer.
``GuardedHttpToolsProtocol`` (Uvicorn's httptools protocol, which ``uvicorn[standard]`` uses) adds:

- a **header deadline**: each request has ``header_timeout_s`` from its first byte (or the
  connection's opening) to finish its request line and headers, 408 and closed otherwise;
- a **head size bound** applied *while* the request line and headers arrive: past
  ``max_head_bytes`` the request is answered 431 and closed before more is buffered or parsed;
- **no unread bodies kept**: once a response is complete while its request body is still
  arriving (a route that never reads it: ``GET /health`` with a body, a 401, 404 or 405), the
  connection is closed, so a body dripping a byte at a time cannot keep it open;
- a **write deadline**: a client that stops reading its answer is dropped once writing to it has
  stalled ``write_timeout_s``, and a connection being closed is aborted if its last bytes cannot
  be delivered within that time;
- a **connection cap**: a connection beyond ``max_connections`` is answered 503 (with
  ``Retry-After``) and closed at once, before anything is read.

Bodies that a route does read get their read timeouts in the app (``middleware.BodyReadTimeout``),
so they hold under any server. ``speaker-transcripts serve`` runs Uvicorn with this protocol
(``guarded_config``); plain ``uvicorn speaker_transcripts.server.app:app`` has the body timeouts
but none of the above.
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
    write_timeout_s: float = 30.0
    max_head_bytes: int = 32 * 1024  # request line + headers as sent (HeaderGate's 16 kB counts names and values)


@functools.cache
def limits_from_environment() -> ConnectionLimits:
    """The limits ``HEADER_TIMEOUT_S`` and ``MAX_CONNECTIONS`` set (read once per process), for
    ``uvicorn speaker_transcripts.server.app:app --http speaker_transcripts.server.connection_guard:GuardedHttpToolsProtocol``."""
    return limits_from_settings(ServerSettings())


def limits_from_settings(settings: ServerSettings) -> ConnectionLimits:
    return ConnectionLimits(
        header_timeout_s=settings.header_timeout_s,
        max_connections=settings.max_connections,
        write_timeout_s=settings.write_timeout_s,
    )


def _refusal(status: int, reason: str, message: str, headers: str = "") -> bytes:
    body = json.dumps({"error": message}).encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"{headers}connection: close\r\n\r\n"
    ).encode() + body


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """Uvicorn's httptools protocol with the limits above (``limits``)."""

    def __init__(self, *args: Any, limits: ConnectionLimits | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits or limits_from_environment()
        self._header_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._in_head = True  # the bytes arriving now belong to a request line or headers
        self._head_bytes = 0
        self._head_tail = b""  # the last bytes seen, for a blank line split across reads
        self._lost = False
        self._running: Any = None  # the request being answered (pipelined ones wait in ``pipeline``)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            logger.warning("refused a connection: %d open (MAX_CONNECTIONS)", len(self.connections) - 1)
            refusal = _refusal(503, "Service Unavailable", "too many open connections; retry later", "retry-after: 1\r\n")
            transport.write(refusal)
            self._close()
            return
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._in_head and not self._head_fits(data):
            self._unset_keepalive_if_required()
            message = f"the request line and headers exceed {self.limits.max_head_bytes // 1024} kB"
            self.transport.write(_refusal(431, "Request Header Fields Too Large", message))
            self._close()
            return
        super().data_received(data)

    def _head_fits(self, data: bytes) -> bool:
        """Count the head's bytes up to its blank line; False once they pass ``max_head_bytes``."""
        seen = self._head_tail + data
        end = seen.find(b"\r\n\r\n")
        self._head_bytes += (end + 4 - len(self._head_tail)) if end >= 0 else len(data)
        self._head_tail = seen[-3:]
        return self._head_bytes <= self.limits.max_head_bytes

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_deadline()  # a keep-alive connection's next request gets its own deadline

    def on_headers_complete(self) -> None:
        self._disarm_header_deadline()
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes, self._head_tail = True, 0, b""  # what follows is the next request

    def on_response_complete(self) -> None:
        answered = self._running  # ``cycle`` may be a pipelined request behind it, still arriving and unanswered
        super().on_response_complete()
        if answered is not None and answered.more_body and not self.transport.is_closing():
            self._close()  # its body is still arriving and nobody will read it: don't let it hold the connection

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.limits.write_timeout_s, self._writes_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._disarm_header_deadline()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None
        super().connection_lost(exc)

    def _writes_stalled(self) -> None:
        self._write_deadline = None
        if not self._lost:
            logger.info("dropped a connection whose client stopped reading (WRITE_TIMEOUT_S=%g)", self.limits.write_timeout_s)
            self._abort()

    def _abort(self) -> None:
        """Drop the connection now; the request being answered, and any pipelined behind it, see a
        disconnected client instead of writing to a closed transport."""
        for cycle in {self._running, self.cycle} - {None}:  # ``cycle`` is the last parsed, not the one answering
            cycle.disconnected = True
            cycle.message_event.set()
        self.pipeline.clear()
        self.transport.abort()

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)

    def _close(self) -> None:
        """Close once what is written has gone out, and abort if it cannot go out in time
        (a client that does not read would otherwise keep a closing connection forever)."""
        self.transport.close()
        self.loop.call_later(self.limits.write_timeout_s, lambda: None if self._lost else self._abort())

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
        self._close()


def guarded_config(asgi_app: Any, settings: ServerSettings | None = None, **options: Any) -> uvicorn.Config:
    """Uvicorn's config with this guard: the header deadline and the connection cap from
    ``settings``, and its largest WebSocket frame (``LIVE_MAX_FRAME_KB``); ``options`` are Uvicorn's
    (host, port, log_level). WebSocket keepalive pings are sent, but a late pong closes nothing: a
    live session that stops reading a fast client (its backlog bound) leaves the client's pong in TCP
    behind its audio, and the promise is that such a client is slowed, not dropped. A client that is
    gone is found by the session's idle timeout and its write timeout instead."""
    settings = settings or ServerSettings()
    limits = limits_from_settings(settings)
    options.setdefault("ws_ping_timeout", None)
    return uvicorn.Config(
        asgi_app, http=functools.partial(GuardedHttpToolsProtocol, limits=limits), ws_max_size=settings.live_max_frame_kb * 1024, **options
    )
