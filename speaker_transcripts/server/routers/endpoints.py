"""The Inference Endpoints payload: ``POST /`` and ``POST /predict``.

The handler's own request (JSON ``{"inputs": base64, "parameters": {...}}``), a raw ``audio/*``
body with parameters in the query string, or multipart ``file`` + ``parameters``; the answer is
the orchestrator's response as Inference Endpoints returns it.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field
from starlette.datastructures import UploadFile as StarletteUploadFile

from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.server.errors import ServiceError
from speaker_transcripts.server.inference import infer
from speaker_transcripts.server.middleware import BEARER

router = APIRouter(dependencies=[Depends(BEARER)])  # documents the scheme; HeaderGate checks the key


class Chunk(BaseModel):
    text: str
    timestamp: tuple[float, float] = Field(description="start and end in seconds")
    speaker: str | None = None


class SpeakerSegment(BaseModel):
    speaker: str
    text: str
    timestamp: tuple[float, float]
    overlapping: list[str] | None = Field(default=None, description="the other speakers heard during it, if any")


class SpeakerTurn(BaseModel):
    speaker: str
    start: float
    end: float


class KnownSpeakerReport(BaseModel):
    name: str
    named: bool = Field(description="whether a voice in the audio was given this name")
    similarity: float | None = Field(description="the closest cosine similarity of the clip to a diarized voice")


class SpeakerEmbeddings(BaseModel):
    model: str | None = Field(description="the diarization model whose embedding model made the vectors")
    metric: str
    dimension: int
    speakers: dict[str, list[float]]


class EndpointResponse(BaseModel):
    """The handler's response, as Inference Endpoints returns it."""

    text: str
    chunks: list[Chunk]
    speakers: list[SpeakerSegment]
    language: str | None
    duration: float
    decoding: str = Field(description="which path ran: 'assisted', or 'batched (batch_size N)'")
    warnings: list[str]
    diarization: list[SpeakerTurn] | None = Field(default=None, description="who spoke when, overlaps kept (when diarized)")
    known_speakers: list[KnownSpeakerReport] | None = None
    speaker_embeddings: SpeakerEmbeddings | None = None


class EndpointRequest(BaseModel):
    """The JSON form of a request: base64 audio and the handler's parameters."""

    inputs: str = Field(description="the audio file, base64-encoded")
    parameters: dict[str, Any] = Field(default_factory=dict, description="see the README's parameter table")


ENDPOINT_BODY = {
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


async def predict(request: Request) -> EndpointResponse:
    """Transcribe (and diarize) one audio file; raw bodies take parameters from the query string."""
    return await infer(request, await endpoint_payload(request))


for path in ("/", "/predict"):
    router.add_api_route(
        path,
        predict,
        methods=["POST"],
        response_model=EndpointResponse,
        response_model_exclude_unset=True,  # a chunk has a speaker only when the handler gave it one
        openapi_extra=ENDPOINT_BODY,
        name=f"predict{path}",
    )


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
