"""Connection limits Uvicorn lacks, so that no client, authenticated or not, can hold a connection.

``GuardedHttpToolsProtocol`` (Uvicorn's httptools protocol) adds a header deadline from a request's
first byte (408), a bound on the head while it arrives (431), no unread bodies kept (the connection
closes with the answer, lingering: see ``LingeringTransport``), a write deadline for clients that stop reading, and a connection cap counted
from ``accept``, in all and per client address (503 at once; refusals logged as one line an
interval). With a certificate, ``TlsGate`` holds each connection from ``accept`` through its TLS
handshake within the same cap and the header deadline (asyncio's own handshake ran 60 s outside both),
and answers plain HTTP on the TLS port with a 400. Bodies a route reads get their timeouts in
``middleware.BodyReadTimeout``. ``speaker-transcripts serve`` runs Uvicorn with all of it
(``guarded_config``, ``GuardedServer``); plain ``uvicorn speaker_transcripts.server.app:app`` has the
body timeouts only. The limits and what they answer: docs/errors.md, "Limits".
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
import ssl
from asyncio.sslproto import SSLProtocol
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import get_remote_addr

from speaker_transcripts.config import ServerSettings

logger = logging.getLogger("speaker_transcripts.server")


@dataclass(frozen=True)
class ConnectionLimits:
    """What the protocol enforces (``HEADER_TIMEOUT_S``, ``MAX_CONNECTIONS``)."""

    header_timeout_s: float = 10.0
    max_connections: int = 256
    write_timeout_s: float = 30.0
    max_head_bytes: int = 32 * 1024  # request line + headers as sent (HeaderGate's 16 kB counts names and values)
    max_per_client: int = 64


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
        max_per_client=settings.max_connections_per_client,
    )


class RefusalLog:
    """Refused connections logged as one line an ``interval_s`` with their count, not a line each:
    a client that reconnects as fast as it is refused cannot flood the log."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self.interval_s = interval_s
        self._pending: dict[str, int] = {}
        self._flush: asyncio.TimerHandle | None = None

    def refused(self, loop: asyncio.AbstractEventLoop, limit: str, detail: str) -> None:
        """Note a connection refused by ``limit`` (a setting's name); ``detail`` says how it was reached."""
        if self._flush is None:  # the first of a burst is told at once, the rest at the interval's end
            logger.warning("refused a connection: %s (%s)", detail, limit)
            self._flush = loop.call_later(self.interval_s, self._summary)
            return
        self._pending[limit] = self._pending.get(limit, 0) + 1

    def _summary(self) -> None:
        self._flush = None
        if self._pending:
            limits = ", ".join(f"{limit}: {count}" for limit, count in self._pending.items())
            logger.warning("refused %d more connections in the last %g s (%s)", sum(self._pending.values()), self.interval_s, limits)
            self._pending.clear()


REFUSALS = RefusalLog()


def refusal_reason(connections: set[Any], client: tuple[str, int] | None, limits: ConnectionLimits) -> tuple[str, str] | None:
    """The limit a connection just accepted (already in ``connections``) is over and how, or None.
    Every protocol in ``connections`` has a ``client`` (address, port) or None. Connections that
    linger after their answer (``GuardedHttpToolsProtocol.lingering``) make room: the one in the
    way that lingered longest is closed rather than the new one refused."""
    while (reason := _over(connections, client, limits)) is not None:
        per_client = reason[0] == "MAX_CONNECTIONS_PER_CLIENT"
        lingering = [
            other
            for other in connections
            if getattr(other, "lingering", False) and not (per_client and not _same_host(other.client, client))
        ]
        if not lingering:
            return reason
        min(lingering, key=lambda other: other.linger_ends).drop()
    return None


def _over(connections: set[Any], client: tuple[str, int] | None, limits: ConnectionLimits) -> tuple[str, str] | None:
    if len(connections) > limits.max_connections:
        return "MAX_CONNECTIONS", f"{len(connections) - 1} open"
    if client is not None:
        same = sum(1 for other in connections if _same_host(other.client, client))
        if same > limits.max_per_client:
            return "MAX_CONNECTIONS_PER_CLIENT", f"{same - 1} open from {client[0]}"
    return None


def _same_host(one: tuple[str, int] | None, other: tuple[str, int] | None) -> bool:
    return one is not None and other is not None and one[0] == other[0]


def _refusal(status: int, reason: str, message: str, headers: str = "") -> bytes:
    body = json.dumps({"error": message}).encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"{headers}connection: close\r\n\r\n"
    ).encode() + body


LINGER_IDLE_S = 2.0  # a closing connection whose client sent nothing for this long is closed
LINGER_MAX_S = 10.0  # and any closing connection after this long


class LingeringTransport:
    """A connection's transport as its requests see it: closed while the client is still sending a
    request, it lingers instead (``GuardedHttpToolsProtocol._linger``). Closing a socket with unread
    bytes sends a reset, and the client's kernel then drops the answer it had not read yet: a client
    refused mid-upload saw "connection reset" instead of its 503."""

    def __init__(self, transport: asyncio.Transport, linger: Callable[[], bool]) -> None:
        self.inner, self._linger, self._lingering = transport, linger, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def close(self) -> None:
        if not self._lingering:
            self._lingering = self._linger()
            if not self._lingering:
                self.inner.close()

    def is_closing(self) -> bool:
        return self._lingering or self.inner.is_closing()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """Uvicorn's httptools protocol with the limits above (``limits``)."""

    def __init__(self, *args: Any, limits: ConnectionLimits | None = None, admitted: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits or limits_from_environment()
        self._admitted = admitted  # counted already, at accept (``TlsGate``)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._in_head = True  # the bytes arriving now belong to a request line or headers
        self._head_bytes = 0
        self._head_tail = b""  # the last bytes seen, for a blank line split across reads
        self._lost = False
        self._running: Any = None  # the request being answered (pipelined ones wait in ``pipeline``)
        self.linger_ends = 0.0  # when a lingering close ends at the latest (0: not lingering)
        self._last_heard = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(LingeringTransport(transport, self._linger))  # type: ignore[arg-type]
        reason = None if self._admitted else refusal_reason(self.connections, self.client, self.limits)
        if reason is not None:
            REFUSALS.refused(self.loop, *reason)
            transport.write(_refusal(503, "Service Unavailable", "too many open connections; retry later", "retry-after: 1\r\n"))
            self._close()
            return
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self._last_heard = self.loop.time()  # the rest of a request nobody will answer: dropped
            return
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

    def handle_websocket_upgrade(self) -> None:
        self.transport = self.transport.inner  # type: ignore[attr-defined]  # a WebSocket closes by its own handshake
        super().handle_websocket_upgrade()

    def _linger(self) -> bool:
        """Close the way HTTP servers do when the client may still be sending (a request's head or
        body has begun): end our side once the answer is out (where the transport can), read and
        drop what still comes, and close when the client closes, is silent for ``LINGER_IDLE_S``,
        or after ``LINGER_MAX_S``. False (close at once) when nothing of a request has arrived."""
        if self._lost or (self._in_head and not self._head_bytes):
            return False
        transport = self.transport.inner  # type: ignore[attr-defined]
        if transport.can_write_eof():  # TLS cannot: its client reads the answer by its length
            transport.write_eof()
        self._last_heard = self.loop.time()
        self.linger_ends = self._last_heard + LINGER_MAX_S
        self.flow.resume_reading()
        self.loop.call_later(LINGER_IDLE_S, self._linger_check)
        return True

    @property
    def lingering(self) -> bool:
        return self.linger_ends > 0

    def drop(self) -> None:
        """Close a lingering connection now, out of the count at once (``refusal_reason`` makes room)."""
        self.connections.discard(self)
        self.transport.inner.abort()  # type: ignore[attr-defined]

    def _linger_check(self) -> None:
        if self._lost:
            return
        now = self.loop.time()
        quiet_until = self._last_heard + LINGER_IDLE_S
        if now >= min(quiet_until, self.linger_ends):
            self.transport.inner.close()  # type: ignore[attr-defined]
        else:
            self.loop.call_later(min(quiet_until, self.linger_ends) - now, self._linger_check)

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


PLAIN_HTTP_TO_TLS = _refusal(400, "Bad Request", "this port serves HTTPS: use https://")
TLS_HANDSHAKE = 0x16  # the first byte of a TLS record that opens a handshake (a ClientHello)


class TlsGate(asyncio.Protocol):
    """The protocol of an HTTPS server's connection from ``accept`` until its TLS handshake is done.

    asyncio's own TLS server runs the handshake before the HTTP protocol sees the connection, for
    up to 60 s, outside the connection cap. Here the connection is counted (``refusal_reason``) as
    soon as it is accepted and must finish its handshake within the header timeout; then TLS
    (asyncio's ``SSLProtocol``) is put between the socket and ``inner``, the guarded HTTP protocol.
    A first byte that cannot open a TLS handshake is plain HTTP: it gets a 400 naming https.
    """

    def __init__(self, *, context: ssl.SSLContext, inner: Any, limits: ConnectionLimits, **uvicorn_state: Any) -> None:
        self.context, self.inner, self.limits, self.uvicorn_state = context, inner, limits, uvicorn_state
        self.connections: set[Any] = uvicorn_state["server_state"].connections
        self.loop = asyncio.get_event_loop()
        self.client: tuple[str, int] | None = None
        self.transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        self.transport = transport  # type: ignore[assignment]
        self.client = get_remote_addr(transport)  # type: ignore[arg-type]
        self.connections.add(self)
        reason = refusal_reason(self.connections, self.client, self.limits)
        if reason is not None:  # no TLS yet to answer in: closed at once
            REFUSALS.refused(self.loop, *reason)
            self._done()
            transport.abort()
            return
        self._deadline = self.loop.call_later(self.limits.header_timeout_s, self._too_slow)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        if data[0] != TLS_HANDSHAKE:
            self.transport.write(PLAIN_HTTP_TO_TLS)
            self.transport.close()
            return
        protocol = self.inner(admitted=True, **self.uvicorn_state)
        handshake = self.loop.create_future()
        handshake.add_done_callback(self._handshake_ended)
        remaining = max(self._deadline.when() - self.loop.time(), 0.1) if self._deadline else self.limits.header_timeout_s
        tls = SSLProtocol(self.loop, protocol, self.context, handshake, server_side=True, ssl_handshake_timeout=remaining)
        self.transport.set_protocol(tls)
        tls.connection_made(self.transport)
        _feed(tls, data)

    def connection_lost(self, exc: Exception | None) -> None:  # before the handshake began
        self._done()

    def shutdown(self) -> None:
        """Uvicorn's shutdown: a connection still in its handshake has nothing to finish."""
        if self.transport is not None:
            self.transport.abort()

    def _handshake_ended(self, handshake: asyncio.Future[None]) -> None:
        if not handshake.cancelled():
            handshake.exception()  # a failed handshake is the client's; it closed the connection already
        self._done()

    def _too_slow(self) -> None:
        self._deadline = None
        if self in self.connections and self.transport is not None:
            self.transport.abort()  # the handshake (or its first byte) did not come within HEADER_TIMEOUT_S

    def _done(self) -> None:
        """Out of the count: the connection closed, or its HTTP protocol counts it from now on."""
        self.connections.discard(self)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def _feed(protocol: asyncio.BufferedProtocol, data: bytes) -> None:
    """Hand ``data``, already read, to a buffered protocol as if it had just arrived."""
    view = memoryview(data)
    while view:
        buffer = protocol.get_buffer(len(view))
        taken = min(len(buffer), len(view))
        buffer[:taken] = view[:taken]
        protocol.buffer_updated(taken)
        view = view[taken:]


class GuardedConfig(uvicorn.Config):
    """Uvicorn's config whose TLS, when it has a certificate, is the protocol's (``TlsGate``) rather
    than the event loop's, so that the handshake is inside the connection cap and its deadline."""

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.tls: ssl.SSLContext | None = None

    def load(self) -> None:
        super().load()
        if self.ssl is not None:
            self.tls, self.ssl = self.ssl, None
            self.http_protocol_class = functools.partial(  # type: ignore[assignment]
                TlsGate, context=self.tls, inner=self.http_protocol_class, limits=self.limits
            )


class GuardedServer(uvicorn.Server):
    """Uvicorn's server for a ``GuardedConfig``: its start-up line names https when the protocol serves TLS."""

    def _log_started_message(self, listeners: list[socket.socket]) -> None:  # type: ignore[override]
        tls = getattr(self.config, "tls", None)
        self.config.ssl = tls  # Uvicorn names the scheme from it; the listening socket is already open
        try:
            super()._log_started_message(listeners)
        finally:
            self.config.ssl = None


def guarded_config(asgi_app: Any, settings: ServerSettings | None = None, **options: Any) -> GuardedConfig:
    """Uvicorn's config with this guard: the header deadline and the connection cap from
    ``settings``, and its largest WebSocket frame (``LIVE_MAX_FRAME_KB``); ``options`` are Uvicorn's
    (host, port, log_level, ssl_certfile); run it with ``GuardedServer``. WebSocket keepalive pings are sent, but a late pong closes nothing: a
    live session that stops reading a fast client (its backlog bound) leaves the client's pong in TCP
    behind its audio, and the promise is that such a client is slowed, not dropped. A client that is
    gone is found by the session's idle timeout and its write timeout instead."""
    settings = settings or ServerSettings()
    limits = limits_from_settings(settings)
    options.setdefault("ws_ping_timeout", None)
    return GuardedConfig(
        asgi_app,
        limits=limits,
        http=functools.partial(GuardedHttpToolsProtocol, limits=limits),
        ws_max_size=settings.live_max_frame_kb * 1024,
        **options,
    )
