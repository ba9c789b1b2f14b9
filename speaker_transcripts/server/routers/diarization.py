"""Who spoke when, without a transcript: ``POST /v1/audio/diarization``.

The route speaches offers beside the OpenAI audio API, with its form (``file``, ``model``,
``response_format`` ``json`` or ``rttm``, ``known_speaker_names[]`` and
``known_speaker_references[]``) plus the speaker-count hints. It runs the orchestrator with
``task="diarize"``: the same decoding, limits, queue and speaker naming as a transcription.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field

from speaker_transcripts.output.formats import to_rttm
from speaker_transcripts.server.inference import infer
from speaker_transcripts.server.middleware import BEARER
from speaker_transcripts.server.routers.endpoints import KnownSpeakerReport, SpeakerTurn
from speaker_transcripts.server.routers.openai import ClipFieldsRoute, KnownSpeakerFields, check_model_name

router = APIRouter(dependencies=[Depends(BEARER)], route_class=ClipFieldsRoute)  # documents the scheme; HeaderGate checks the key


class DiarizationOptions(KnownSpeakerFields):
    model: str = Field(default="pyannote", description="accepted for compatibility; the server's DIARIZATION_MODEL runs")
    response_format: Literal["json", "rttm"] = "json"
    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None


class DiarizationResponse(BaseModel):
    """speaches' answer (``duration``, ``segments``), with what was adjusted and how each known speaker fared."""

    duration: float
    segments: list[SpeakerTurn] = Field(description="who spoke when; overlapping speech has a segment per speaker")
    warnings: list[str] = []
    known_speakers: list[KnownSpeakerReport] | None = None


RTTM_EXAMPLE = "SPEAKER meeting 1 0.470 1.671 <NA> <NA> SPEAKER_00 <NA> <NA>\n"


@router.post(
    "/v1/audio/diarization",
    response_model=DiarizationResponse,
    responses={200: {"content": {"text/plain": {"example": RTTM_EXAMPLE}}}},
)
async def diarization(
    request: Request,
    file: Annotated[UploadFile, File(description="the audio file (any common container)")],
    options: Annotated[DiarizationOptions, Form()],
) -> Response:
    """The speaker timeline of one recording, as JSON segments or RTTM lines."""
    check_model_name(options.model)
    parameters: dict[str, Any] = {
        "task": "diarize",
        "num_speakers": options.num_speakers,
        "min_speakers": options.min_speakers,
        "max_speakers": options.max_speakers,
        "known_speakers": options.known_speakers(),
        "voices": options.chosen_voices(),
    }
    data = {"inputs": await file.read(), "parameters": {name: value for name, value in parameters.items() if value is not None}}
    result = await infer(request, data)
    if options.response_format == "rttm":
        uri = (file.filename or "audio").rsplit("/", 1)[-1].rsplit(".", 1)[0] or "audio"
        return PlainTextResponse(to_rttm(result["diarization"], uri))
    body = DiarizationResponse(
        duration=result["duration"], segments=result["diarization"], warnings=result["warnings"],
        known_speakers=result.get("known_speakers"),
    )
    return JSONResponse(body.model_dump(exclude_none=True))
