"""Health and readiness: ``GET /health`` (the process answers) and ``GET /ready`` (what is loaded).

Both stay open when ``API_KEY`` is set: load balancers and orchestrators probe them anonymously.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from speaker_transcripts.server.inference import InferenceQueue

router = APIRouter()


PROBE_METHODS = ["GET", "HEAD"]  # load balancers probe with either; HEAD stays out of the OpenAPI document


@router.get("/health")
@router.head("/health", include_in_schema=False)
async def health() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/ready")
@router.head("/ready", include_in_schema=False)
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
        # What the model computes in: the CPU fast path's parts (int8 decoder, bfloat16 encoder) when it
        # ran, not the float32 its weights were loaded in; "precision" is kept for older clients.
        "dtype": getattr(recognizer, "precision", None) or str(getattr(recognizer, "dtype", "unknown")).removeprefix("torch."),
        "precision": getattr(recognizer, "precision", "unknown"),
        "queue": {
            "in_progress_or_waiting": queue.pending, "max_queue": queue.max_queue,
            "held_mb": round(queue.held_bytes / 2**20, 1), "max_queued_mb": queue.max_held_bytes / 2**20,
            "uploading": queue.reading, "uploading_mb": round(queue.reading_bytes / 2**20, 1),  # bodies still arriving, by what they sent
        },
        "auth": request.app.state.settings.api_key is not None,
        # How the page records: a WebRTC call when offered, a client secret for it when the server has a key.
        "realtime": {"webrtc": request.app.state.settings.webrtc,
                     "client_secrets": request.app.state.settings.realtime_max_client_secrets > 0},
        # What a client can check before it sends a file (the page refuses what would be refused anyway).
        "limits": {"max_upload_mb": request.app.state.settings.max_upload_mb, "max_audio_seconds": handler.settings.max_audio_seconds},
    }


@router.options("/health", include_in_schema=False)
@router.options("/ready", include_in_schema=False)
async def probe_options() -> Response:
    """What the probes accept, for clients that ask before they call."""
    return Response(status_code=204, headers={"Allow": ", ".join([*PROBE_METHODS, "OPTIONS"])})
