"""ASGI middlewares: what is decided before a route runs (origin, headers, body size, body pace, start-up).

They wrap the app outermost-first in ``app.create_app``: ``SameOriginGate`` (the ``Host`` and
``Origin`` a browser sends), ``HeaderGate`` (size, duplicate ``Authorization``, the API key), then
``BodyReadTimeout``, then ``BodySizeLimit``.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import socket
import time
from urllib.parse import urlsplit

from fastapi.security import HTTPBearer
from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from speaker_transcripts.server.client_secrets import REALTIME_PATHS, ClientSecrets
from speaker_transcripts.server.errors import ModelLoadError, error_response

BEARER = HTTPBearer(auto_error=False, description="needed when the server has API_KEY set")
WRONG_KEY = "missing or wrong API key: send 'Authorization: Bearer <API_KEY>'"


class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` with 413 before anything parses them.

    A declared ``Content-Length`` is refused at once; a chunked body is counted as it
    arrives. Either way the rest of the upload is read and discarded (up to a bound) so the
    client gets the 413 instead of a reset connection.
    """

    DRAIN_LIMIT_BYTES = 256 * 1024 * 1024

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            # A client that waits for "100 Continue" has sent nothing: answer without inviting the upload.
            waiting = headers.get(b"expect", b"").lower() == b"100-continue"
            await self._refuse(scope, receive, send, received=0, more=not waiting)
            return
        messages: list[Message] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                await self._refuse(scope, receive, send, received, more=message.get("more_body", False))
                return
            messages.append(message)
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, received: int, more: bool = True) -> None:
        while more and received < self.DRAIN_LIMIT_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            received += len(message.get("body", b""))
            more = message.get("more_body", False)
        limit_mb = self.max_bytes / 1024 / 1024
        message = f"the request body is larger than this server's limit of {limit_mb:g} MB (MAX_UPLOAD_MB)"
        await error_response(scope["path"], 413, message, None if more else {"Connection": "close"})(scope, receive, send)


class AdmissionGate:
    """Check the queue's capacity before a body is read: an upload the queue could not take, by
    count (``MAX_QUEUE``) or by the bytes its ``Content-Length`` declares (``MAX_QUEUED_MB``), is
    503 (with ``Retry-After``) at once, so concurrent uploads cannot hold more memory than the
    queue admits. An admitted upload counts in ``InferenceQueue.reading`` until it reaches the
    queue (``inference.infer``) or fails before it, and in ``reading_bytes`` by the bytes it has
    sent so far, not what it declared: uploads that declare 100 MB and send a byte now and then
    hold no memory, so they cannot keep everyone else out. One whose bytes would take what is
    held past ``MAX_QUEUED_MB`` is 503 then."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        queue = getattr(scope["app"].state, "queue", None) if "app" in scope else None
        if scope["type"] != "http" or scope["method"] != "POST" or queue is None:
            await self.app(scope, receive, send)
            return
        refusal = queue.refusal() or queue.too_heavy(_declared_length(scope) or queue.max_upload_bytes)
        if refusal is not None:
            await error_response(scope["path"], refusal.status, refusal.message, {**refusal.headers, "Connection": "close"})(
                scope, receive, send
            )
            return
        queue.admit_upload()
        state = scope.setdefault("state", {})
        state[ADMITTED] = 0
        refused = False

        async def counted_receive() -> Message:
            nonlocal refused
            message = await receive()
            size = len(message.get("body", b""))
            if message["type"] != "http.request" or not size or ADMITTED not in state:
                return message
            overload = queue.too_heavy(size, uploading=state[ADMITTED])
            if overload is None:
                state[ADMITTED] += size
                queue.upload_received(size)
                return message
            refused = True
            await error_response(scope["path"], overload.status, overload.message, {**overload.headers, "Connection": "close"})(
                scope, receive, send
            )
            return {"type": "http.disconnect"}

        async def guarded_send(message: Message) -> None:
            if not refused:  # after the 503 the route's answer has nowhere to go
                await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        finally:
            if ADMITTED in state:
                queue.upload_done(state.pop(ADMITTED))


ADMITTED = "admitted_upload"  # scope state: the bytes it has sent, counted in InferenceQueue.reading_bytes


def _declared_length(scope: Scope) -> int | None:
    """The body's ``Content-Length`` (the body limit refuses one that sends more), or None when
    it has none (chunked): the upload limit is then reserved for it."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


class BodyReadTimeout:
    """A request body must keep coming (``idle_s`` between chunks), end within ``total_s``, and,
    once ``idle_s`` has passed, arrive at ``min_rate`` bytes a second on average: a stalled or
    dripping upload gets 408 and frees its connection, and the route sees a disconnected client.
    (A byte every few seconds is never idle, yet would hold a connection for ``total_s``.) Once
    the body is in, ``receive`` is passed through untouched (waiting for a disconnect while the
    models work is not a stall)."""

    def __init__(self, app: ASGIApp, idle_s: float, total_s: float, min_rate: float = 0.0) -> None:
        self.app, self.idle_s, self.total_s, self.min_rate = app, idle_s, total_s, min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        deadline = started + self.total_s
        state = {"body_done": False, "timed_out": False, "response_started": False, "received": 0}

        def patience() -> float:
            """Seconds the next chunk may take: the idle timeout, the total, and the time at which the
            average rate so far would fall below ``min_rate`` (never before ``idle_s`` have passed)."""
            rate_deadline = started + max(self.idle_s, state["received"] / self.min_rate) if self.min_rate else deadline
            return max(min(self.idle_s, deadline - time.monotonic(), rate_deadline - time.monotonic()), 0.0)

        async def timed_receive() -> Message:
            if state["body_done"]:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), timeout=patience())
            except TimeoutError:
                state["body_done"] = True
                if not state["response_started"]:
                    state["timed_out"] = True
                    message_text = (
                        f"the request body stalled, came too slowly or took too long (BODY_IDLE_TIMEOUT_S={self.idle_s:g}, "
                        f"BODY_MIN_RATE_KB_S={self.min_rate / 1024:g}, BODY_TIMEOUT_S={self.total_s:g})"
                    )
                    await error_response(scope["path"], 408, message_text, {"Connection": "close"})(scope, receive, send)
                return {"type": "http.disconnect"}
            state["received"] += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body", False):
                state["body_done"] = True
            return message

        async def guarded_send(message: Message) -> None:
            if state["timed_out"]:
                return  # the 408 went out; the route's late answer has nowhere to go
            if message["type"] == "http.response.start":
                state["response_started"] = True
            await send(message)

        await self.app(scope, timed_receive, guarded_send)


class HeaderGate:
    """ASGI middleware, outermost: refuse what the headers alone decide, before a byte of body is read.

    Headers over ``MAX_HEADER_BYTES`` in total are 431; a second ``Authorization`` header is 400
    (which one counts would otherwise be the server's silent choice); with ``API_KEY``, a POST
    (every POST route is an inference route) without the right bearer key is 401 at once, so an
    anonymous client cannot make the server read a 100-MB upload first, and so is a read under one of
    ``protected_prefixes`` (``/v1/`` as OpenAI's API, ``/metrics`` unless ``METRICS_PUBLIC``). This is the only key check; the routes declare the bearer
    scheme (``BEARER``) for the OpenAPI document. On ``REALTIME_PATHS`` only, an unexpired client secret
    stands in for the key, and a CORS preflight (``OPTIONS``, which carries no key) goes through."""

    MAX_HEADER_BYTES = 16 * 1024

    def __init__(self, app: ASGIApp, api_key: SecretStr | None, protected_prefixes: tuple[str, ...] = (),
                 client_secrets: ClientSecrets | None = None) -> None:
        self.app = app
        self._expected = api_key.get_secret_value().encode() if api_key else None
        self._protected_prefixes = protected_prefixes
        self._client_secrets = client_secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        authorizations = [value for name, value in headers if name == b"authorization"]
        refusal: tuple[int, str, dict[str, str]] | None = None
        if sum(len(name) + len(value) for name, value in headers) > self.MAX_HEADER_BYTES:
            refusal = (431, f"the request headers exceed {self.MAX_HEADER_BYTES // 1024} kB", {})
        elif len(authorizations) > 1:
            refusal = (400, "send one Authorization header, not several", {})
        elif self._expected is not None and (scope["method"] == "POST" or scope["path"].startswith(self._protected_prefixes)):
            scheme, _, token = (authorizations[0] if authorizations else b"").partition(b" ")
            # constant-time comparison: no guessing the key by timing
            right_key = scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._expected)
            if not right_key and not self._realtime_pass(scope, token.strip() if scheme.lower() == b"bearer" else None):
                refusal = (401, WRONG_KEY, {"WWW-Authenticate": "Bearer"})
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message, extra = refusal
        await error_response(scope["path"], status, message, {**extra, "Connection": "close"})(scope, receive, send)

    def _realtime_pass(self, scope: Scope, token: bytes | None) -> bool:
        """Whether a request without the key may go on: a CORS preflight or a client secret, on a realtime path."""
        if scope["path"] not in REALTIME_PATHS:
            return False
        return scope["method"] == "OPTIONS" or (self._client_secrets is not None and self._client_secrets.check(token) is not None)


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class SameOriginGate:
    """Refuse what a page of another site can make a browser send here.

    - A request that may change something (any method but GET, HEAD and OPTIONS, and a WebSocket
      handshake) from another origin is 403: by its ``Origin`` (scheme, host and port against the
      request's own ``Host``), or, without one, by ``Sec-Fetch-Site``. A multipart POST needs no CORS
      preflight, so without this any page could enrol or replace a voice. ``allowed_origins`` are
      let through. Clients that are not browsers send neither header and are not concerned.
    - With ``check_hosts``, a ``Host`` that names this server by a name it does not know is 400:
      DNS rebinding points an attacker's name at this server, and the page on that name then
      reads it as its own origin. Known are IP addresses, names of one label (``localhost``, a
      machine's name), ``*.localhost``, this machine's host name and ``allowed_hosts`` (``*``: any).
    """

    def __init__(self, app: ASGIApp, check_hosts: bool, allowed_hosts: tuple[str, ...] = (), allowed_origins: tuple[str, ...] = ()) -> None:
        self.app = app
        self.check_hosts = check_hosts and "*" not in allowed_hosts
        self.known_hosts = {name.lower().rstrip(".") for name in allowed_hosts} | {socket.gethostname().lower()}
        self.allowed_origins = {origin.lower().rstrip("/") for origin in allowed_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {name: value.decode("latin-1") for name, value in scope["headers"]}
        host = headers.get(b"host", "")
        refusal: tuple[int, str] | None = None
        if self.check_hosts and host and not self._known(host):
            refusal = 400, f"this server does not answer to the name {_hostname(host)!r}: add it to ALLOWED_HOSTS"
        elif (scope["type"] == "websocket" or scope["method"] not in SAFE_METHODS) and self._cross_origin(headers, host):
            what = headers.get(b"origin") or f"a {headers.get(b'sec-fetch-site')} page"
            refusal = 403, f"requests from another origin ({what}) may not change anything here; add it to ALLOWED_ORIGINS"
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": refusal[1][:120]})  # Uvicorn answers the handshake 403
        else:
            await error_response(scope["path"], *refusal, {"Connection": "close"})(scope, receive, send)

    def _known(self, host: str) -> bool:
        name = _hostname(host)
        if name in self.known_hosts or name.endswith(".localhost") or "." not in name:
            return True  # a name of one label is this machine's or the local network's, not one from a public DNS
        try:
            ipaddress.ip_address(name)  # an address is no name an attacker's DNS can point here
        except ValueError:
            return False
        return True

    def _cross_origin(self, headers: dict[bytes, str], host: str) -> bool:
        origin = headers.get(b"origin")
        if origin is None:
            return headers.get(b"sec-fetch-site", "none") in ("cross-site", "same-site")
        if origin.lower().rstrip("/") in self.allowed_origins:
            return False
        try:
            parts = urlsplit(origin)
            if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
                return True  # "null" (a sandboxed page, a file) or no web origin at all
            theirs = (parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme))
            ours = urlsplit(f"{parts.scheme}://{host}")
            return theirs != (ours.hostname, ours.port or DEFAULT_PORTS.get(parts.scheme))
        except ValueError:  # a port that is no number
            return True


def _hostname(host: str) -> str:
    """``Host``'s name without its port or an IPv6 address's brackets, lower case."""
    try:
        return (urlsplit(f"//{host}").hostname or "").rstrip(".")
    except ValueError:
        return host.lower()


class SecurityHeaders:
    """Headers every HTTP answer carries: ``nosniff`` (a JSON error is never run as a script or a
    page), and over HTTPS ``Strict-Transport-Security``, so a browser that came once over HTTPS never
    tries plain HTTP here again."""

    HSTS = (b"strict-transport-security", b"max-age=31536000")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [(b"x-content-type-options", b"nosniff")] + ([self.HSTS] if scope.get("scheme") == "https" else [])

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", ())}
                message = {**message, "headers": [*message.get("headers", ()), *(h for h in extra if h[0] not in present)]}
            await send(message)

        await self.app(scope, receive, with_headers)


class StartupFailureInOneLine:
    """ASGI middleware: a ``ModelLoadError`` at start-up reaches uvicorn's log as its one-line
    message instead of Starlette's formatted traceback; other start-up failures keep theirs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def shortened(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                last_line = (message.get("message") or "").strip().splitlines()[-1:] or [""]
                prefix = f"{ModelLoadError.__module__}.{ModelLoadError.__name__}: "
                if last_line[0].startswith(prefix):
                    message = {**message, "message": last_line[0].removeprefix(prefix)}
            await send(message)

        await self.app(scope, receive, shortened)
