"""The server's voice library over HTTP: ``GET /v1/voices``, ``POST /v1/voices`` and ``DELETE /v1/voices/{name}``.

The library is the one ``speaker-transcripts speakers add`` keeps and ``KNOWN_SPEAKERS_DIR`` points
the server at: its people are named in every diarized request (``voices[]`` chooses some of them).
The page lists them to choose who is in a recording, and saves a speaker of a result as a person
("save this voice as ..."). Only names are ever answered: a voice's embedding stays on the server.
Enrolment runs through the inference queue like a transcription (the same bounds, timeout and key),
and a name enrolled again is replaced, as ``speakers add`` replaces it. The server reads the library's
folder again when it changes, so ``speakers add`` and ``speakers remove`` need no restart.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from speaker_transcripts.config import speaker_name
from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.server.errors import error_response
from speaker_transcripts.server.inference import infer
from speaker_transcripts.server.middleware import BEARER

router = APIRouter(dependencies=[Depends(BEARER)])  # documents the scheme; HeaderGate checks the key


class VoiceName(BaseModel):
    name: str


class VoiceList(BaseModel):
    """Who is enrolled (names only), and whether this server takes new voices."""

    enrolment: bool = Field(description="whether POST /v1/voices can enrol (KNOWN_SPEAKERS_DIR is set and the pipeline embeds voices)")
    voices: list[VoiceName]


class Enrolment(BaseModel):
    name: str
    model: str = Field(description="the diarization model the voice was embedded with")


@router.get("/v1/voices", response_model=VoiceList)
async def voices(request: Request) -> VoiceList:
    """The people of the server's voice library, by name."""
    handler = request.app.state.handler
    library = getattr(handler, "voices", {})
    enrolment = getattr(handler.settings, "known_speakers_dir", None) is not None and handler.capabilities.embeds_speakers
    return VoiceList(enrolment=enrolment, voices=[VoiceName(name=name) for name in sorted(library, key=str.casefold)])


@router.post("/v1/voices", response_model=Enrolment, status_code=201)
async def enrol(
    request: Request,
    file: Annotated[UploadFile, File(description="a few seconds of this person talking alone (any common audio format)")],
    name: Annotated[str, Form(description="the person's name, as it should appear in transcripts")],
) -> JSONResponse:
    """Save a person's voice in the server's library: every diarized request names them from now on."""
    if len((await request.form()).getlist("name")) > 1:  # which one counts would be the server's silent choice
        raise InvalidRequestError("send one name field, not several")
    try:
        name = speaker_name(name)  # as a known speaker's name is checked
    except ValueError as error:
        raise InvalidRequestError(str(error)) from None
    handler = request.app.state.handler

    def enrolled(data: dict[str, Any], should_stop: Any = None, **_: Any) -> dict[str, Any]:
        voice = handler.enrol(data["name"], data["inputs"], should_stop)
        return {"name": voice.name, "model": voice.model}

    result = await infer(request, {"name": name, "inputs": await file.read()}, work=enrolled)
    return JSONResponse(Enrolment(**result).model_dump(), status_code=201)


@router.delete("/v1/voices/{name}", status_code=204, responses={404: {"description": "no such person is enrolled"}})
async def forget(request: Request, name: str) -> Response:
    """Remove a person from the server's voice library: no request names them from now on."""
    name = " ".join(name.split())
    if not request.app.state.handler.forget(name):
        return error_response(request.url.path, 404, f"{name!r} is not enrolled in this server's voice library")
    return Response(status_code=204)
