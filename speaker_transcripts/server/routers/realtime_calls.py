"""``POST /v1/realtime/calls``: a live session over WebRTC, as OpenAI's browser clients open one.

The body is the browser's SDP offer (``application/sdp``, or OpenAI's multipart form with ``sdp`` and
an optional ``session``); the answer is SDP too (201, ``Location: /v1/realtime/calls/{id}``). The offer
must carry an audio track (the microphone) and the ``oai-events`` data channel (the WebSocket route's
events, both ways). The session is the WebSocket route's (``realtime.Connection``), in the same slots
and limits; it starts with the client secret's configuration (or the form's ``session``). Browser apps
on ``ALLOWED_ORIGINS`` may call it cross-origin (CORS, preflight included); the key or a client secret
comes in ``Authorization: Bearer``. ``POST /v1/realtime/calls/{id}/hangup`` (with the key) ends a call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.sdp import SessionDescription
from fastapi import APIRouter, Request, Response, Security

from speaker_transcripts.server.client_secrets import ClientSecret
from speaker_transcripts.server.errors import error_response, logger
from speaker_transcripts.server.middleware import BEARER
from speaker_transcripts.server.realtime_protocol import ProtocolError, SessionSettings, new_id, updated_settings
from speaker_transcripts.server.routers.realtime import admit, busy_message, connection, releaser
from speaker_transcripts.server.webrtc import (
    EVENTS_LABEL,
    OPUS_MAX_BITRATE,
    CallTransport,
    NoPortFree,
    restrict_candidates,
    with_opus_bitrate,
    without_mdns_candidates,
)

router = APIRouter()
CONNECT_TIMEOUT_S = 30.0  # from the answer to the data channel's opening; a call that never connects frees its slot
CORS_HEADERS = {"Access-Control-Allow-Methods": "POST, OPTIONS", "Access-Control-Allow-Headers": "Authorization, Content-Type",
                "Access-Control-Max-Age": "600"}
logging.getLogger("aioice").setLevel(logging.WARNING)  # aioice logs each connectivity check at INFO


class BadOffer(ValueError):
    """The request holds no usable SDP offer: a 400 that says why."""


@router.post("/v1/realtime/calls", status_code=201, dependencies=[Security(BEARER)],
              responses={201: {"content": {"application/sdp": {}}, "description": "the SDP answer"}})
async def create_call(request: Request) -> Response:
    """Open a WebRTC call: the SDP offer in, the answer out (``?intent=transcription``, the only intent served)."""
    app, path = request.app, request.url.path
    cors = _cors(request)
    if not app.state.settings.webrtc:
        return error_response(path, 404, "WebRTC calls are turned off here (WEBRTC=false); use the WebSocket, GET /v1/realtime", cors)
    intent = request.query_params.get("intent", "transcription")
    if intent != "transcription":
        return error_response(path, 400, f"intent {intent!r} is not served here: this server runs transcription sessions", cors)
    try:
        sdp, session = await _offer(request)
        start = _secret(request).session if session is None and _secret(request) is not None else session
        if start is not None:
            updated_settings(SessionSettings(), {"type": "session.update", "session": start})  # a bad one: 400 now
    except (BadOffer, ProtocolError) as error:
        return error_response(path, 400, str(error), cors)
    slot = await admit(app)
    if slot is None:
        return error_response(path, 503, busy_message(app), {**cors, "Retry-After": "5"})
    release = releaser(app, slot)
    settings = app.state.settings
    peer = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    transport = CallTransport(peer, settings.live_max_frame_kb * 1024, settings.live_max_backlog_s)
    peer.on("datachannel", lambda channel: transport.attach(channel) if channel.label == EVENTS_LABEL else None)
    peer.on("track", lambda track: transport.listen(track) if track.kind == "audio" else None)

    @peer.on("connectionstatechange")
    def on_state() -> None:
        if peer.connectionState in ("failed", "closed"):
            transport.end()

    try:
        await peer.setRemoteDescription(RTCSessionDescription(sdp=without_mdns_candidates(sdp), type="offer"))
        hosts = [host.strip() for host in settings.webrtc_hosts.split(",") if host.strip()]
        restrict_candidates(peer, hosts, settings.webrtc_port_range)
        await peer.setLocalDescription(await peer.createAnswer())
    except NoPortFree as error:
        refusal = error_response(path, 503, str(error), {**cors, "Retry-After": "5"})
    except Exception as error:  # noqa: BLE001 (aiortc refuses an offer it cannot answer with many kinds of error)
        refusal = error_response(path, 400, f"the SDP offer cannot be answered: {error or type(error).__name__}", cors)
    else:
        refusal = None
    if refusal is not None:
        release()
        await transport.close(1000)
        return refusal
    call_id = new_id("rtc")
    app.state.calls[call_id] = transport
    task = asyncio.ensure_future(_run(app, call_id, transport, slot, release, start))
    app.state.call_tasks.add(task)  # held: the loop keeps only weak references to tasks
    task.add_done_callback(app.state.call_tasks.discard)
    answer = with_opus_bitrate(peer.localDescription.sdp, OPUS_MAX_BITRATE)
    return Response(answer, status_code=201, media_type="application/sdp",
                    headers={**cors, "Location": f"/v1/realtime/calls/{call_id}"})


async def _run(app: Any, call_id: str, transport: CallTransport, slot: Any, release: Any, start: dict[str, Any] | None) -> None:
    """The call's session, once its data channel is open; the slot is freed however it ends."""
    try:
        try:
            await asyncio.wait_for(transport.opened.wait(), timeout=CONNECT_TIMEOUT_S)
        except TimeoutError:
            return
        if transport.connected:
            await connection(app, transport, slot, release, secret=ClientSecret(0, start) if start is not None else None).run()
    except Exception as error:  # noqa: BLE001 (a background task: nobody else would hear of it)
        logger.error("realtime call %s failed: %r", call_id, error)
    finally:
        release()
        await transport.close(1000)
        app.state.calls.pop(call_id, None)
        if transport.dropped_s:
            logger.warning("realtime call %s: %.1f s of audio dropped (the session fell %g s behind)", call_id,
                           transport.dropped_s, app.state.settings.live_max_backlog_s)


@router.post("/v1/realtime/calls/{call_id}/hangup", dependencies=[Security(BEARER)])
async def hang_up(call_id: str, request: Request) -> Response:
    """End a call from the server side (the app's backend, with the key)."""
    transport = request.app.state.calls.get(call_id)
    if transport is None:
        return error_response(request.url.path, 404, f"no call {call_id!r} is open here")
    await transport.close(1000)
    return Response(status_code=200)


@router.options("/v1/realtime/calls", include_in_schema=False)
async def preflight(request: Request) -> Response:
    """CORS preflight: browser apps on ``ALLOWED_ORIGINS`` may open calls; other origins are refused."""
    cors = _cors(request)
    if not cors:
        return error_response(request.url.path, 403, "this origin may not open calls here; add it to ALLOWED_ORIGINS")
    return Response(status_code=204, headers={**cors, **CORS_HEADERS})


def _cors(request: Request) -> dict[str, str]:
    """CORS headers for a request from an origin in ``ALLOWED_ORIGINS`` (none for others)."""
    origin = request.headers.get("origin", "")
    allowed = {item.strip().lower().rstrip("/") for item in request.app.state.settings.allowed_origins.split(",") if item.strip()}
    if origin.lower().rstrip("/") not in allowed:
        return {}
    return {"Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": "Location", "Vary": "Origin"}


def _secret(request: Request) -> ClientSecret | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return request.app.state.client_secrets.check(token.strip().encode()) if scheme.lower() == "bearer" else None


async def _offer(request: Request) -> tuple[str, dict[str, Any] | None]:
    """The SDP offer and the form's ``session`` (None without one), checked for what a call needs."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    session = None
    if content_type == "multipart/form-data":
        form = await request.form()
        sdp, session_text = form.get("sdp"), form.get("session")
        if not isinstance(sdp, str):
            raise BadOffer("the form needs an 'sdp' field holding the offer")
        if session_text is not None:
            try:
                session = json.loads(session_text if isinstance(session_text, str) else await session_text.read())
            except ValueError as error:
                raise BadOffer(f"the form's 'session' is not JSON: {error}") from None
            if not isinstance(session, dict):
                raise BadOffer("the form's 'session' is a JSON object, as a session.update's session")
    elif content_type in ("application/sdp", "text/plain", ""):
        try:
            sdp = (await request.body()).decode()
        except UnicodeDecodeError:
            raise BadOffer("the SDP offer is not UTF-8 text") from None
    else:
        raise BadOffer(f"send the SDP offer as application/sdp (or a multipart form with 'sdp'), not {content_type}")
    if not sdp.lstrip().startswith("v=0"):
        raise BadOffer("the body is not an SDP offer (one starts with 'v=0')")
    try:
        parsed = SessionDescription.parse(sdp)
    except Exception as error:  # noqa: BLE001 (aiortc's parser fails on malformed text with whatever it tripped on)
        raise BadOffer(f"the body is not an SDP offer ({error or type(error).__name__})") from None
    kinds = {(media.kind, media.direction) for media in parsed.media}
    if not any(kind == "audio" and direction in ("sendrecv", "sendonly", None) for kind, direction in kinds):
        raise BadOffer("the offer sends no audio track: add the microphone (pc.addTrack) before creating the offer")
    if not any(kind == "application" for kind, _ in kinds):
        raise BadOffer(f"the offer has no data channel: create the {EVENTS_LABEL!r} channel before creating the offer")
    return sdp, session
