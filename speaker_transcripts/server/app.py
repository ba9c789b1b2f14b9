"""The ASGI app: the Inference Endpoints contract and the OpenAI audio API over one set of models.

    speaker-transcripts serve --host 0.0.0.0 --port 8000
    (or: uvicorn speaker_transcripts.server.app:app ..., without the connection guard)

Unset, ``ASR_MODEL`` and ``DIARIZATION_MODEL`` are the embedded ``whisper-base`` and
``pyannote-campplus`` (``models.registry``; no Hub needed); set them to Hub ids or folders, or
``DIARIZATION_MODEL=none``, to change that. Models load once, in the lifespan, before the server
accepts connections. The routes live in ``routers/`` (one module per API surface), what is
decided before a route runs in ``middleware``, the queue in ``inference``, the error answers in
``errors``.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.console import show_package_log_unless_configured
from speaker_transcripts.live.capacity import live_capacity
from speaker_transcripts.server.client_secrets import ClientSecrets
from speaker_transcripts.server.errors import (
    ClientFaultsInOneLine,
    ModelLoadError,
    RedactingFilter,
    SecretRedactor,
    add_error_handlers,
    logger,
)
from speaker_transcripts.server.inference import Handler, InferenceQueue
from speaker_transcripts.server.metrics import MetricsMiddleware, ServiceMetrics
from speaker_transcripts.server.middleware import (
    AdmissionGate,
    BodyReadTimeout,
    BodySizeLimit,
    HeaderGate,
    SameOriginGate,
    SecurityHeaders,
    StartupFailureInOneLine,
)
from speaker_transcripts.server.routers import (
    client_secrets,
    diarization,
    docs,
    endpoints,
    health,
    openai,
    page,
    realtime,
    realtime_calls,
    subtitles,
    voices,
)
from speaker_transcripts.server.routers import metrics as metrics_router
from speaker_transcripts.server.routers.realtime import LiveSlots


def _load_self_hosted_handler() -> Handler:
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.transcriber import Transcriber

    return Transcriber(settings=ModelSettings.self_hosted())


def create_app(load_handler: Callable[[], Handler] | None = None, settings: ServerSettings | None = None) -> FastAPI:
    """The ASGI app; models load in the lifespan (before the first request is accepted)."""
    settings = settings or ServerSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        show_package_log_unless_configured()  # the model-load lines, under plain uvicorn too
        started = time.perf_counter()
        try:
            handler = load_handler() if load_handler is not None else _load_self_hosted_handler()
        except (OSError, RuntimeError, ValueError) as error:  # a model that cannot load: say why, in one line
            raise ModelLoadError(f"could not load the models: {error}") from error
        metrics.model_load_seconds.set(time.perf_counter() - started)
        app.state.loaded_at = time.time()
        app.state.handler = handler
        app.state.redact = SecretRedactor(handler.settings, settings)
        app.state.queue = InferenceQueue(handler, settings, app.state.redact, metrics)
        live = live_capacity(handler.capabilities.fast_encoder, settings.live_max_sessions, settings.live_lookahead_s)
        app.state.live = LiveSlots(live)
        # A key sent in the query string is refused, and not logged: Uvicorn logs HTTP requests in its access
        # log and WebSocket handshakes (the live route's URL) in its error log, both with the query string.
        logs = [logging.getLogger("uvicorn.access"), logging.getLogger("uvicorn.error")]
        filters = [RedactingFilter(app.state.redact), ClientFaultsInOneLine()]
        for log, each in itertools.product(logs, filters):
            log.addFilter(each)
        logger.info("ready: ASR %s, auth %s, live sessions up to %d (lookahead %g s)", handler.configured.asr_model,
                    "on" if settings.api_key else "off", live.max_sessions, live.lookahead_s)
        yield
        for log, each in itertools.product(logs, filters):
            log.removeFilter(each)
        app.state.queue.close()
        for call in list(app.state.calls.values()):  # WebRTC calls hang up with the server
            await call.close(1001)
        app.state.live.executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="Speaker-attributed transcription",
        summary="Whisper (+ assistant) and pyannote behind the Inference Endpoints and OpenAI audio APIs",
        lifespan=lifespan,
        # A redirect to the slash-less path would build its Location from the client's Host header.
        redirect_slashes=False,
        docs_url=None,  # routers/docs.py serves /docs without a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = metrics = ServiceMetrics()
    app.state.client_secrets = ClientSecrets(settings.realtime_max_client_secrets)
    app.state.calls, app.state.call_tasks = {}, set()  # WebRTC calls open now (routers/realtime_calls.py)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_upload_bytes)
    app.add_middleware(BodyReadTimeout, idle_s=settings.body_idle_timeout_s, total_s=settings.body_timeout_s,
                       min_rate=settings.body_min_rate_kb_s * 1024)
    app.add_middleware(AdmissionGate)  # after the key check, before a byte of body is read
    protected = ("/v1/",) if settings.metrics_public else ("/v1/", "/metrics")
    app.add_middleware(HeaderGate, api_key=settings.api_key, protected_prefixes=protected,  # added later = runs earlier
                       client_secrets=app.state.client_secrets)
    app.add_middleware(
        SameOriginGate,
        check_hosts=settings.api_key is None or bool(settings.allowed_hosts),
        allowed_hosts=_listed(settings.allowed_hosts),
        allowed_origins=_listed(settings.allowed_origins),
    )
    app.add_middleware(SecurityHeaders)
    app.add_middleware(StartupFailureInOneLine)
    add_error_handlers(app, settings)
    for surface in (endpoints, openai, diarization, voices, realtime, client_secrets, realtime_calls, subtitles, page, docs, health,
                    metrics_router):
        app.include_router(surface.router)
    app.mount("/static", page.static_assets(), name="static")
    app.mount("/docs/assets", docs.swagger_assets(), name="docs-assets")
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=app.routes)  # outermost: counts refusals too
    return app


def _listed(setting: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in setting.split(",") if item.strip())


app = create_app()
