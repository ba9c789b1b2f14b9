"""``POST /v1/realtime/client_secrets``: a backend (holding ``API_KEY``) mints a short-lived key for a browser.

OpenAI's request and answer: ``expires_after.seconds`` (10 s to 2 h, default 10 min) and ``session``
(the starting configuration of the sessions the secret opens, a ``session.update``'s ``session``) in;
``value`` (``ek_...``), ``expires_at`` and ``session`` out. What a secret may do: ``client_secrets``.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Security
from fastapi.responses import JSONResponse

from speaker_transcripts.server.client_secrets import DEFAULT_TTL_S, MAX_TTL_S, MIN_TTL_S, ClientSecrets, TooManySecrets
from speaker_transcripts.server.errors import error_response
from speaker_transcripts.server.middleware import BEARER
from speaker_transcripts.server.realtime_protocol import ProtocolError, SessionSettings, new_id, session_object, updated_settings

router = APIRouter()


@router.post("/v1/realtime/client_secrets", dependencies=[Security(BEARER)])
async def client_secrets(request: Request) -> JSONResponse:
    """Mint a client secret for the realtime routes (WebSocket and WebRTC); it cannot call any other route."""
    store: ClientSecrets = request.app.state.client_secrets
    path = request.url.path
    if store.limit == 0:
        return error_response(path, 404, "client secrets are turned off here (REALTIME_MAX_CLIENT_SECRETS=0)")
    try:
        body = json.loads(await request.body() or b"{}")
        ttl_s, session = _parsed(body)
        settings = updated_settings(SessionSettings(), {"type": "session.update", "session": session})
    except (ValueError, ProtocolError) as error:  # json.JSONDecodeError is a ValueError
        return error_response(path, 400, f"{error}")
    try:
        value, record = store.mint(ttl_s, session)
    except TooManySecrets as error:
        return error_response(path, 429, str(error), {"Retry-After": "60"})
    model = request.app.state.handler.configured.asr_model
    return JSONResponse({"value": value, "expires_at": record.expires_at,
                         "session": session_object(new_id("sess"), settings, model, record.expires_at, beta=False)})


def _parsed(body: Any) -> tuple[int, dict[str, Any]]:
    """The secret's lifetime and its sessions' starting configuration, or a ProtocolError saying what is wrong."""
    if not isinstance(body, dict):
        raise ProtocolError("the body is a JSON object: {\"expires_after\": {\"seconds\": 600}, \"session\": {...}}")
    expires_after = body.get("expires_after") or {}
    if not isinstance(expires_after, dict):
        raise ProtocolError("expires_after is an object: {\"anchor\": \"created_at\", \"seconds\": 600}")
    if expires_after.get("anchor", "created_at") != "created_at":
        raise ProtocolError("expires_after.anchor is 'created_at'")
    ttl_s = expires_after.get("seconds", DEFAULT_TTL_S)
    if type(ttl_s) is not int or not MIN_TTL_S <= ttl_s <= MAX_TTL_S:
        raise ProtocolError(f"expires_after.seconds is a whole number from {MIN_TTL_S} to {MAX_TTL_S}")
    session = body.get("session") or {"type": "transcription"}
    if not isinstance(session, dict):
        raise ProtocolError("session is an object, as a session.update's session")
    return ttl_s, session
