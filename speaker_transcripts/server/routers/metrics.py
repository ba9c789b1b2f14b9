"""``GET /metrics``: the Prometheus exposition (``server.metrics``). With ``API_KEY`` set it needs
the key unless ``METRICS_PUBLIC=true`` (a scraper inside the cluster without the key); the
``HeaderGate`` checks it, as it checks inference routes."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

router = APIRouter()


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(request: Request) -> Response:
    """Requests by route and status, latency, real-time factor, audio seconds, queue depth, abandoned work, model load time."""
    return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
