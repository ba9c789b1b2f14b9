"""ASGI middlewares: what is decided before a route runs (headers, body size, body pace, start-up).

They wrap the app outermost-first in ``app.create_app``: ``HeaderGate`` (size, duplicate
``Authorization``, the API key), then ``BodyReadTimeout``, then ``BodySizeLimit``.
"""

from __future__ import annotations

import asyncio
import hmac
import time

from fastapi.security import HTTPBearer
from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
    queue admits. Admitted uploads count in ``InferenceQueue.reading`` and ``reading_bytes``
    until they reach the queue (``inference.infer``) or fail before it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        queue = getattr(scope["app"].state, "queue", None) if "app" in scope else None
        if scope["type"] != "http" or scope["method"] != "POST" or queue is None:
            await self.app(scope, receive, send)
            return
        reserved = _declared_length(scope) or queue.max_upload_bytes
        refusal = queue.refusal() or queue.too_heavy(reserved)
        if refusal is not None:
            await error_response(scope["path"], refusal.status, refusal.message, {**refusal.headers, "Connection": "close"})(
                scope, receive, send
            )
            return
        queue.admit_upload(reserved)
        scope.setdefault("state", {})[ADMITTED] = reserved
        try:
            await self.app(scope, receive, send)
        finally:
            if ADMITTED in scope["state"]:
                queue.upload_done(scope["state"].pop(ADMITTED))


ADMITTED = "admitted_upload"  # scope state: the bytes reserved for it in InferenceQueue.reading_bytes


def _declared_length(scope: Scope) -> int | None:
    """The body's ``Content-Length`` (the body limit refuses one that sends more), or None when
    it has none (chunked): the upload limit is then reserved for it."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


class BodyReadTimeout:
    """A request body must keep coming (``idle_s`` between chunks) and end within ``total_s``:
    a stalled or dripping upload gets 408 and frees its connection, and the route sees a
    disconnected client. Once the body is in, ``receive`` is passed through untouched (waiting
    for a disconnect while the models work is not a stall)."""

    def __init__(self, app: ASGIApp, idle_s: float, total_s: float) -> None:
        self.app, self.idle_s, self.total_s = app, idle_s, total_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = time.monotonic() + self.total_s
        state = {"body_done": False, "timed_out": False, "response_started": False}

        async def timed_receive() -> Message:
            if state["body_done"]:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), timeout=max(min(self.idle_s, deadline - time.monotonic()), 0.0))
            except TimeoutError:
                state["body_done"] = True
                if not state["response_started"]:
                    state["timed_out"] = True
                    message_text = (
                        f"the request body stalled or took too long (BODY_IDLE_TIMEOUT_S={self.idle_s:g}, "
                        f"BODY_TIMEOUT_S={self.total_s:g})"
                    )
                    await error_response(scope["path"], 408, message_text, {"Connection": "close"})(scope, receive, send)
                return {"type": "http.disconnect"}
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
    scheme (``BEARER``) for the OpenAPI document."""

    MAX_HEADER_BYTES = 16 * 1024

    def __init__(self, app: ASGIApp, api_key: SecretStr | None, protected_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self._expected = api_key.get_secret_value().encode() if api_key else None
        self._protected_prefixes = protected_prefixes

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
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self._expected):
                refusal = (401, WRONG_KEY, {"WWW-Authenticate": "Bearer"})
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message, extra = refusal
        await error_response(scope["path"], status, message, {**extra, "Connection": "close"})(scope, receive, send)


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
