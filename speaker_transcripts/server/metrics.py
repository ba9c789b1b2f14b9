"""What an operator scrapes: ``GET /metrics`` in Prometheus' text format (``prometheus-client``).

``ServiceMetrics`` holds one registry per app (two apps in one process, as in the tests, never
share counters). ``MetricsMiddleware`` counts every answered request by route and status and
times it, refusals included (401, 413, 503, ...): it wraps the whole app. The inference queue
reports the work itself: audio seconds, the real-time factor, abandoned requests. Connections the
guard refuses at the protocol level (over ``MAX_CONNECTIONS``) never reach the app and are not counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CLIENT_CLOSED = 499  # nginx's "client closed request": counted apart from the server's own 500s
UNMATCHED_ROUTE = "unmatched"  # any path that is not a route: one label, so scanners cannot grow the series
LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
REAL_TIME_FACTOR_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5)


class ServiceMetrics:
    """The service's counters, histograms and gauges, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        prefix = "speaker_transcripts"
        self.requests = Counter(f"{prefix}_requests", "HTTP requests answered, by route and status", ["route", "status"],
                                registry=self.registry)
        self.latency = Histogram(f"{prefix}_request_duration_seconds", "time from request to the end of the answer, by route",
                                 ["route"], buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.real_time_factor = Histogram(f"{prefix}_real_time_factor", "processing seconds per second of audio",
                                          buckets=REAL_TIME_FACTOR_BUCKETS, registry=self.registry)
        self.audio_seconds = Counter(f"{prefix}_audio_seconds", "seconds of audio transcribed or diarized",
                                     registry=self.registry)
        self.abandoned = Counter(f"{prefix}_abandoned_requests", "work stopped before its answer: client gone or deadline passed",
                                 registry=self.registry)
        self.queue_depth = Gauge(f"{prefix}_queue_depth", "requests running or waiting for the models", registry=self.registry)
        self.live_sessions = Gauge(f"{prefix}_live_sessions", "live transcription sessions open now (LIVE_MAX_SESSIONS bounds them)",
                                   registry=self.registry)
        self.live_refused = Counter(f"{prefix}_live_refused", "live sessions refused, by reason (auth, capacity)", ["reason"],
                                    registry=self.registry)
        self.model_load_seconds = Gauge(f"{prefix}_model_load_seconds", "seconds the models took to load at start-up",
                                        registry=self.registry)

    def observe_work(self, audio_seconds: float, processing_seconds: float) -> None:
        """One request's work, as the queue saw it (decoding and waiting for the models included)."""
        self.audio_seconds.inc(max(audio_seconds, 0.0))
        if audio_seconds > 0:
            self.real_time_factor.observe(processing_seconds / audio_seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def route_paths(routes: Iterable[Any]) -> frozenset[str]:
    """The fixed paths among an app's routes (included routers searched too); templates with
    parameters (``/v1/models/{model_id:path}``) are named by the router once it has matched them."""
    paths: set[str] = set()
    for route in routes:
        if isinstance(getattr(route, "path", None), str):
            paths.add(route.path)
        elif hasattr(route, "original_router"):
            paths |= route_paths(route.original_router.routes)
    return frozenset(path for path in paths if "{" not in path)


class MetricsMiddleware:
    """ASGI middleware, outermost: every HTTP answer counted and timed under its route's path
    (the template for parameterised routes), refusals before routing (401, 413, 503) included."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics, routes: Iterable[Any]) -> None:
        self.app = app
        self.metrics = metrics
        self.paths = route_paths(routes)

    def route_of(self, scope: Scope) -> str:
        matched = getattr(scope.get("route"), "path", None)  # set by the router once it has matched
        if isinstance(matched, str):
            return matched
        return scope["path"] if scope["path"] in self.paths else UNMATCHED_ROUTE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app fails before it answers
        answered = gone = False

        async def recorded(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                status, answered = message["status"], True
            await send(message)

        async def watched() -> Message:
            nonlocal gone
            message = await receive()
            gone = gone or message["type"] == "http.disconnect"
            return message

        try:
            await self.app(scope, watched, recorded)
        finally:
            if gone and not answered:
                status = CLIENT_CLOSED  # the client left before any answer (mid-upload): not a failure of ours
            route = self.route_of(scope)
            self.metrics.requests.labels(route=route, status=str(status)).inc()
            self.metrics.latency.labels(route=route).observe(time.perf_counter() - started)
