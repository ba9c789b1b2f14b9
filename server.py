"""Self-hosted server: the Inference Endpoints contract and the OpenAI audio API, one set of models.

    python server.py --host 0.0.0.0 --port 8000    (or: uvicorn server:app ..., without the connection guard)

Unset, ``ASR_MODEL`` and ``DIARIZATION_MODEL`` are the embedded ``whisper-base`` and
``pyannote-campplus`` (``models.py``; no Hub needed); set them to Hub ids or folders, or
``DIARIZATION_MODEL=none``, to change that.

Routes: ``POST /`` and ``/predict`` (the handler's payload as JSON, a raw ``audio/*`` body with
parameters in the query string, or multipart ``file`` + ``parameters``), ``POST
/v1/audio/transcriptions`` and ``/v1/audio/translations`` (OpenAI's multipart API, speaker
labels as our extension), ``GET /health`` and ``GET /ready``. Models load once, before the
server accepts connections. Inference runs in worker threads (the event loop stays free for
health checks and refusals); the handler's lock keeps requests on the shared models from
interleaving, and a bounded queue answers 503 with ``Retry-After`` instead of piling up.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hmac
import json
import logging
import math
import statistics
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, Protocol

import uvicorn
from fastapi import Depends, FastAPI, File, Form, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, Field, SecretStr
from starlette.datastructures import UploadFile as StarletteUploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from config import ServerSettings
from connection_guard import ConnectionLimits, GuardedHttpToolsProtocol
from errors import AudioTooLongError, InvalidRequestError, RequestAbandoned
from openai_api import (
    STREAMABLE_FORMATS,
    TEXT_FORMATS,
    DiarizedTranscription,
    Granularity,
    ResponseFormat,
    TranscriptionJson,
    VerboseTranscription,
    closing_events,
    delta_event,
    diarized_json,
    render_text,
    return_timestamps_for,
    verbose_json,
)

logger = logging.getLogger("server")
INFERENCE_WORKERS = 2  # one decodes the next upload while the other holds the models


class Handler(Protocol):
    """What the server needs of ``handler.EndpointHandler``."""

    settings: Any
    configured: Any  # the settings as configured: model names, not cache folders
    capabilities: Any

    def __call__(self, data: Any, **callbacks: Any) -> dict[str, Any]: ...


class ServiceError(Exception):
    """A refusal with its HTTP status, a message for the client and optional headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class InferenceQueue:
    """Runs handler calls off the event loop; admits one running and ``max_queue`` waiting."""

    def __init__(self, handler: Handler, settings: ServerSettings, redact: Callable[[str], str]) -> None:
        self.handler = handler
        self.redact = redact
        self.max_queue = settings.max_queue
        self.timeout_s = settings.request_timeout_s
        self.pending = 0  # running + waiting; touched only on the event loop
        self._executor = ThreadPoolExecutor(max_workers=INFERENCE_WORKERS, thread_name_prefix="inference")
        self._recent_seconds: deque[float] = deque(maxlen=20)
        self._started: dict[int, float] = {}  # worker thread -> when its current call began

    async def run(
        self, data: dict[str, Any], client_gone: Callable[[], Awaitable[bool]] | None = None, **callbacks: Any
    ) -> dict[str, Any]:
        """The handler's answer to ``data``; ``callbacks`` (``on_segment``) go to the handler.

        Work whose deadline passes (504) or whose client hangs up (``client_gone``, polled) is
        told to stop: the handler ends it at the next decoder step, or as soon as it gets the
        models if it was still waiting, and its queue slot frees then, not when the work would
        have finished. Until it has stopped it keeps its slot, so the queue never admits more
        work than the models can take."""
        if self.pending > self.max_queue:
            raise ServiceError(
                503,
                f"the server is busy ({self.pending} requests in progress or queued, MAX_QUEUE={self.max_queue}); retry later",
                {"Retry-After": str(self.retry_after_s())},
            )
        self.pending += 1
        stop = threading.Event()
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, self._timed_call, data, {**callbacks, "should_stop": stop.is_set}
        )
        future.add_done_callback(self._finished)
        watcher = asyncio.ensure_future(_poll(client_gone)) if client_gone is not None else None
        try:
            waiting = {future, *([watcher] if watcher else [])}  # asyncio.wait never cancels what it waits on
            done, _ = await asyncio.wait(waiting, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED)
            if future.done():
                return future.result()
            stop.set()
            if watcher is not None and watcher in done:
                raise RequestAbandoned("the client hung up")
            raise ServiceError(504, f"the request took longer than {self.timeout_s:g} s (REQUEST_TIMEOUT_S) and was abandoned")
        except asyncio.CancelledError:  # the response task itself was cancelled: nobody is waiting
            stop.set()
            raise
        finally:
            if watcher is not None:
                watcher.cancel()

    def retry_after_s(self) -> int:
        """Seconds until a slot is likely free, which is all a refused client needs: the typical
        (median) recent processing time, less what the longest-running call has already spent.
        (Multiplying by the queue length overstated it 4x: work ahead of a retry is not the
        whole queue, and abandoned work now leaves early.)"""
        typical = statistics.median(self._recent_seconds) if self._recent_seconds else 1.0
        spent = time.monotonic() - min(self._started.values()) if self._started else 0.0
        return max(1, math.ceil(typical - spent))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _timed_call(self, data: dict[str, Any], callbacks: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        self._started[threading.get_ident()] = started
        try:
            return self.handler(data, **callbacks)
        except (InvalidRequestError, ServiceError, RequestAbandoned):
            raise
        except Exception as error:  # a bug or a device failure: log it here, tell the client little
            logger.error("inference failed: %s", self.redact("".join(traceback.format_exception(error))))
            raise ServiceError(500, "internal error while processing the audio; the server log has the details") from error
        finally:
            self._started.pop(threading.get_ident(), None)
            self._recent_seconds.append(time.monotonic() - started)

    def _finished(self, future: asyncio.Future) -> None:
        self.pending -= 1
        if not future.cancelled():
            future.exception()  # seen: abandoned work ends in RequestAbandoned that nobody awaits


CLIENT_POLL_S = 0.5


async def _poll(client_gone: Callable[[], Awaitable[bool]]) -> None:
    """Return once ``client_gone`` says so (checked every ``CLIENT_POLL_S``)."""
    while not await client_gone():
        await asyncio.sleep(CLIENT_POLL_S)


class SecretRedactor:
    """Blanks the configured secrets out of text bound for the log: an exception message (from
    our code or a library's) may quote a token, and a traceback quotes the message."""

    def __init__(self, *settings: Any) -> None:
        secrets = (getattr(each, name, None) for each in settings for name in ("hf_token", "api_key"))
        self._secrets = [secret.get_secret_value() for secret in secrets if secret is not None]

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


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
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send, received=0)
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
        response = error_response(
            scope["path"], 413, f"the request body is larger than this server's limit of {limit_mb:g} MB (MAX_UPLOAD_MB)"
        )
        await response(scope, receive, send)


AudioUpload = Annotated[UploadFile, File(description="the audio file (any common container)")]
BEARER = HTTPBearer(auto_error=False, description="needed when the server has API_KEY set")


WRONG_KEY = "missing or wrong API key: send 'Authorization: Bearer <API_KEY>'"


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
    anonymous client cannot make the server read a 100-MB upload first. This is the only key
    check; the routes declare the bearer scheme (``BEARER``) for the OpenAPI document."""

    MAX_HEADER_BYTES = 16 * 1024

    def __init__(self, app: ASGIApp, api_key: SecretStr | None) -> None:
        self.app = app
        self._expected = api_key.get_secret_value().encode() if api_key else None

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
        elif self._expected is not None and scope["method"] == "POST":
            scheme, _, token = (authorizations[0] if authorizations else b"").partition(b" ")
            # constant-time comparison: no guessing the key by timing
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self._expected):
                refusal = (401, WRONG_KEY, {"WWW-Authenticate": "Bearer"})
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message, extra = refusal
        await error_response(scope["path"], status, message, {**extra, "Connection": "close"})(scope, receive, send)


class Chunk(BaseModel):
    text: str
    timestamp: tuple[float, float] = Field(description="start and end in seconds")
    speaker: str | None = None


class SpeakerSegment(BaseModel):
    speaker: str
    text: str
    timestamp: tuple[float, float]


class EndpointResponse(BaseModel):
    """The handler's response, as Inference Endpoints returns it."""

    text: str
    chunks: list[Chunk]
    speakers: list[SpeakerSegment]
    language: str | None
    duration: float
    decoding: str = Field(description="which path ran: 'assisted', or 'batched (batch_size N)'")
    warnings: list[str]


class EndpointRequest(BaseModel):
    """The JSON form of a request: base64 audio and the handler's parameters."""

    inputs: str = Field(description="the audio file, base64-encoded")
    parameters: dict[str, Any] = Field(default_factory=dict, description="see the README's parameter table")


class OpenAIOptions(BaseModel):
    """The OpenAI audio API's form fields, plus our diarization and decoding extensions."""

    model: str = Field(default="whisper-1", description="accepted for compatibility; the server's ASR_MODEL decodes")
    prompt: str | None = None
    response_format: ResponseFormat = "json"
    temperature: float = Field(default=0.0, ge=0.0, le=1.0, description="only 0 (deterministic decoding) is supported")
    timestamp_granularities: list[Granularity] = Field(default_factory=list, alias="timestamp_granularities[]")
    diarize: bool | None = Field(default=None, description="default: diarize when a diarization model is loaded")
    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None
    assisted: bool | None = None
    stream: bool = Field(default=False, description="answer with server-sent events as the audio is decoded")


class TranscriptionOptions(OpenAIOptions):
    language: str | None = None


def error_response(path: str, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """OpenAI's error shape on ``/v1`` routes, Inference Endpoints' ``{"error": message}`` elsewhere."""
    if path.startswith("/v1/"):
        kind = "invalid_request_error" if status < 500 else "server_error"
        body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    else:
        body = {"error": message}
    return JSONResponse(body, status_code=status, headers=headers)


class ModelLoadError(RuntimeError):
    """The models could not load; the message says why and what to do."""


def _load_self_hosted_handler() -> Handler:
    from config import ModelSettings
    from handler import EndpointHandler

    return EndpointHandler(settings=ModelSettings.self_hosted())


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


def create_app(load_handler: Callable[[], Handler] | None = None, settings: ServerSettings | None = None) -> FastAPI:
    """The ASGI app; models load in the lifespan (before the first request is accepted)."""
    settings = settings or ServerSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            handler = load_handler() if load_handler is not None else _load_self_hosted_handler()
        except (OSError, RuntimeError, ValueError) as error:  # a model that cannot load: say why, in one line
            raise ModelLoadError(f"could not load the models: {error}") from error
        app.state.handler = handler
        app.state.redact = SecretRedactor(handler.settings, settings)
        app.state.queue = InferenceQueue(handler, settings, app.state.redact)
        logger.info("ready: ASR %s, auth %s", handler.configured.asr_model, "on" if settings.api_key else "off")
        yield
        app.state.queue.close()

    app = FastAPI(
        title="Speaker-attributed transcription",
        summary="Whisper (+ assistant) and pyannote behind the Inference Endpoints and OpenAI audio APIs",
        lifespan=lifespan,
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_upload_bytes)
    app.add_middleware(BodyReadTimeout, idle_s=settings.body_idle_timeout_s, total_s=settings.body_timeout_s)
    app.add_middleware(HeaderGate, api_key=settings.api_key)  # added later = runs earlier: before the body is read
    app.add_middleware(StartupFailureInOneLine)
    _add_error_handlers(app, settings)

    async def infer(request: Request, data: dict[str, Any], **callbacks: Any) -> dict[str, Any]:
        queue: InferenceQueue = request.app.state.queue
        return await queue.run(data, client_gone=request.is_disconnected, **callbacks)

    async def streamed(request: Request, data: dict[str, Any]) -> Response:
        """Server-sent events as OpenAI streams transcriptions: a ``transcript.text.delta`` per
        decoded chunk, then the segments (with speakers) and ``transcript.text.done``.

        The response starts with the first chunk, so a request the handler refuses (bad audio
        or parameters, audio too long, a full queue) still gets its 4xx; a failure after that
        arrives as an ``error`` event, the only way left to tell the client."""
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        work = asyncio.ensure_future(
            infer(request, data, on_segment=lambda chunk: loop.call_soon_threadsafe(chunks.put_nowait, chunk))
        )
        next_chunk = asyncio.ensure_future(chunks.get())
        await asyncio.wait({work, next_chunk}, return_when=asyncio.FIRST_COMPLETED)
        if not next_chunk.done() and work.exception() is not None:
            next_chunk.cancel()
            raise work.exception()  # answered by the error handlers, as without streaming

        async def events() -> AsyncIterator[str]:
            waiting = next_chunk
            first = True
            while True:  # chunks are queued before the work is marked done, so none is lost
                done, _ = await asyncio.wait({waiting, work}, return_when=asyncio.FIRST_COMPLETED)
                if waiting not in done:
                    break
                yield _server_sent(delta_event(waiting.result(), first))
                first = False
                waiting = asyncio.ensure_future(chunks.get())
            waiting.cancel()
            while not chunks.empty():
                yield _server_sent(delta_event(chunks.get_nowait(), first))
                first = False
            if work.exception() is not None:
                status, message = _status_of(work.exception())
                kind = "invalid_request_error" if status < 500 else "server_error"
                yield _server_sent({"type": "error", "error": {"message": message, "type": kind, "code": status}})
                return
            for event in closing_events(work.result()):
                yield _server_sent(event)

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    endpoint_body = {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": EndpointRequest.model_json_schema()},
                "audio/*": {"schema": {"type": "string", "format": "binary"}},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "parameters": {"type": "string", "description": "a JSON object of parameters"},
                        },
                    }
                },
            },
        }
    }

    guarded = [Depends(BEARER)]  # documents the scheme; HeaderGate checks the key

    async def predict(request: Request) -> EndpointResponse:
        """Transcribe (and diarize) one audio file; raw bodies take parameters from the query string."""
        return await infer(request, await endpoint_payload(request))

    for path in ("/", "/predict"):
        app.add_api_route(
            path,
            predict,
            methods=["POST"],
            response_model=EndpointResponse,
            response_model_exclude_unset=True,  # a chunk has a speaker only when the handler gave it one
            openapi_extra=endpoint_body,
            dependencies=guarded,
            name=f"predict{path}",
        )

    openai_responses: dict[int | str, dict[str, Any]] = {
        200: {"content": {media: {"schema": {"type": "string"}} for media in TEXT_FORMATS.values()}}
    }
    openai_model = TranscriptionJson | VerboseTranscription | DiarizedTranscription

    @app.post("/v1/audio/transcriptions", response_model=openai_model, responses=openai_responses, dependencies=guarded)
    async def transcriptions(
        request: Request,
        file: AudioUpload,
        options: Annotated[TranscriptionOptions, Form()],
    ) -> Response:
        """OpenAI-compatible transcription, with speaker labels when diarizing."""
        return await openai_transcription(request, file, options, "transcribe", options.language)

    @app.post("/v1/audio/translations", response_model=openai_model, responses=openai_responses, dependencies=guarded)
    async def translations(
        request: Request,
        file: AudioUpload,
        options: Annotated[OpenAIOptions, Form()],
    ) -> Response:
        """OpenAI-compatible translation into English, with speaker labels when diarizing."""
        return await openai_transcription(request, file, options, "translate", None)

    async def openai_transcription(
        request: Request,
        file: UploadFile,
        options: OpenAIOptions,
        task: Literal["transcribe", "translate"],
        language: str | None,
    ) -> Response:
        if options.temperature > 0:
            raise InvalidRequestError("temperature sampling is not supported: this server decodes deterministically (send 0)")
        parameters = {
            "task": task,
            "language": language,
            "prompt": options.prompt,
            "return_timestamps": return_timestamps_for(options.timestamp_granularities),
            "diarize": True if options.response_format == "diarized_json" else options.diarize,
            "num_speakers": options.num_speakers,
            "min_speakers": options.min_speakers,
            "max_speakers": options.max_speakers,
            "assisted": options.assisted,
        }
        audio = await file.read()
        data = {"inputs": audio, "parameters": {k: v for k, v in parameters.items() if v is not None}}
        if options.stream:
            if options.response_format not in STREAMABLE_FORMATS:
                raise InvalidRequestError(
                    f"stream=true answers with server-sent events; send response_format {', '.join(STREAMABLE_FORMATS)}, "
                    f"not {options.response_format}"
                )
            return await streamed(request, data)
        result = await infer(request, data)
        headers = {"X-Model": options.model}
        if options.response_format in TEXT_FORMATS:
            media = TEXT_FORMATS[options.response_format]
            return Response(render_text(result, options.response_format), media_type=f"{media}; charset=utf-8", headers=headers)
        body: BaseModel
        if options.response_format == "verbose_json":
            body = verbose_json(result, task, options.timestamp_granularities)
        elif options.response_format == "diarized_json":
            body = diarized_json(result, task)
        else:
            body = TranscriptionJson(text=result["text"])
        return JSONResponse(body.model_dump(exclude_none=True), headers=headers)

    @app.get("/health")
    async def health() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/ready")
    async def ready(request: Request) -> dict[str, Any]:
        """Readiness: which models are loaded, on what device, and how busy the server is."""
        handler = request.app.state.handler
        queue: InferenceQueue = request.app.state.queue
        model_settings = handler.configured  # names as configured; embedded ones resolve to cache folders
        recognizer = getattr(handler, "recognizer", None)
        capabilities = handler.capabilities
        return {
            "status": "ready",
            "models": {
                "asr": model_settings.asr_model,
                "assistant": model_settings.assistant_model if capabilities.has_assistant else None,
                "diarization": model_settings.diarization_model if capabilities.has_diarization else None,
            },
            "device": str(getattr(recognizer, "device", "unknown")),
            "dtype": str(getattr(recognizer, "dtype", "unknown")).removeprefix("torch."),
            "precision": getattr(recognizer, "precision", "unknown"),  # the CPU fast path's int8/bfloat16 parts
            "queue": {"in_progress_or_waiting": queue.pending, "max_queue": queue.max_queue},
            "auth": settings.api_key is not None,
        }

    return app


async def endpoint_payload(request: Request) -> dict[str, Any]:
    """The handler's ``{"inputs", "parameters"}`` from whichever body form the client chose."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        body = parse_json(await request.body(), 'the body is not valid JSON; send {"inputs": "<base64 audio>", "parameters": {...}}')
        if not isinstance(body, dict):
            raise InvalidRequestError('the body must be a JSON object: {"inputs": "<base64 audio>", "parameters": {...}}')
        return body
    if content_type == "multipart/form-data":
        async with request.form() as form:
            upload = form.get("file")
            if not isinstance(upload, StarletteUploadFile):
                raise InvalidRequestError("a multipart request needs the audio file in a 'file' field")
            audio = await upload.read()
            parameters = _parameters_field(form.get("parameters"))
        return {"inputs": audio, "parameters": {**query_parameters(request), **parameters}}
    if content_type in ("", "application/octet-stream") or content_type.startswith(("audio/", "video/")):
        return {"inputs": await request.body(), "parameters": query_parameters(request)}
    raise ServiceError(
        415,
        f"unsupported content type '{content_type}': send application/json (base64 inputs), "
        "audio/* or application/octet-stream (raw file), or multipart/form-data (file + parameters)",
    )


def query_parameters(request: Request) -> dict[str, Any]:
    """Query-string parameters typed as JSON where they parse (``2``, ``true``), else strings (``en``)."""
    return {name: _json_or_text(value) for name, value in request.query_params.items()}


def parse_json(text: str | bytes, problem: str) -> Any:
    """JSON from a client; invalid or absurdly nested text is a 400 saying ``problem``."""
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidRequestError(problem) from None
    except RecursionError:  # "[" * 100000: json recurses once per level
        raise InvalidRequestError(f"{problem} (nested too deeply)") from None


def _json_or_text(value: str) -> Any:
    try:
        return parse_json(value, "")
    except InvalidRequestError:
        return value


def _parameters_field(value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if not isinstance(value, str):
        raise InvalidRequestError("the multipart 'parameters' field must be a JSON object as text, not a file")
    parameters = parse_json(value, "the multipart 'parameters' field is not valid JSON")
    if not isinstance(parameters, dict):
        raise InvalidRequestError("the multipart 'parameters' field must be a JSON object")
    return parameters


def _server_sent(event: dict[str, Any]) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n"


CLIENT_CLOSED = 499


def _status_of(error: BaseException) -> tuple[int, str]:
    """The status and message an error handler would answer ``error`` with (for stream events)."""
    if isinstance(error, ServiceError):
        return error.status, error.message
    if isinstance(error, AudioTooLongError):
        return 413, str(error)
    if isinstance(error, InvalidRequestError):
        return 400, str(error)
    return 500, "internal error while processing the audio; the server log has the details"


def _add_error_handlers(app: FastAPI, settings: ServerSettings) -> None:
    def on(error_type: type[Exception]) -> Callable[[Callable[..., JSONResponse]], Callable[..., Awaitable[JSONResponse]]]:
        def register(build: Callable[..., JSONResponse]) -> Callable[..., Awaitable[JSONResponse]]:
            async def handle(request: Request, error: Any) -> JSONResponse:
                return build(request.url.path, error)

            app.add_exception_handler(error_type, handle)
            return handle

        return register

    async def refused(request: Request, error: Exception) -> JSONResponse:
        status, message = _status_of(error)
        return error_response(request.url.path, status, message, getattr(error, "headers", None))

    for refusal in (ServiceError, InvalidRequestError):  # AudioTooLongError is an InvalidRequestError (413)
        app.add_exception_handler(refusal, refused)

    async def abandoned(request: Request, error: Exception) -> JSONResponse:
        logger.info("request to %s abandoned by its client; its work was stopped", request.url.path)
        return error_response(request.url.path, CLIENT_CLOSED, str(error))  # nobody reads it; nginx's code for the log

    app.add_exception_handler(RequestAbandoned, abandoned)

    @on(RequestValidationError)
    def schema(path: str, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'][1:]) or 'body'}: {item['msg']}" for item in error.errors()
        )
        return error_response(path, 422, f"invalid request: {problems}")

    @on(StarletteHTTPException)
    def http_error(path: str, error: StarletteHTTPException) -> JSONResponse:
        return error_response(path, error.status_code, str(error.detail), getattr(error, "headers", None))

    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        # the redactor knows HF_TOKEN only once the models are loaded; API_KEY from the start
        redact = getattr(request.app.state, "redact", None) or SecretRedactor(settings)
        path = request.url.path
        logger.error("request to %s failed: %s", path, redact("".join(traceback.format_exception(error))))
        return error_response(path, 500, "internal error while processing the request; the server log has the details")

    app.add_exception_handler(Exception, unexpected)


app = create_app()


def guarded_config(asgi_app: Any, settings: ServerSettings | None = None, **options: Any) -> uvicorn.Config:
    """Uvicorn's config with the connection guard (``connection_guard.py``): the header deadline
    and the connection cap from ``settings``; ``options`` are Uvicorn's (host, port, log_level)."""
    settings = settings or ServerSettings()
    limits = ConnectionLimits(header_timeout_s=settings.header_timeout_s, max_connections=settings.max_connections)
    return uvicorn.Config(asgi_app, http=functools.partial(GuardedHttpToolsProtocol, limits=limits), **options)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Serve the models over HTTP (Uvicorn with the connection guard).")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python server.py --host 0.0.0.0 --port 8000``: the recommended way to serve."""
    arguments = parse_arguments(argv)
    uvicorn.Server(guarded_config(app, host=arguments.host, port=arguments.port, log_level=arguments.log_level)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
