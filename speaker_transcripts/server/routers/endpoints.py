"""The Inference Endpoints payload: ``POST /`` and ``POST /predict``.

The handler's own request (JSON ``{"inputs": base64, "parameters": {...}}``), a raw ``audio/*``
body with parameters in the query string, or multipart ``file`` + ``parameters``; the answer is
the orchestrator's response as Inference Endpoints returns it.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import numpy as np
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
    parameters: dict[str, Any] = Field(default_factory=dict, description="see the parameter table of the docs (docs/api.md, Parameters)")


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
        raw = await request.body()
        problem = 'the body is not valid JSON; send {"inputs": "<base64 audio>", "parameters": {...}}'
        # a large body is parsed in a worker thread: json.loads on the event loop stalled /health for seconds
        body = await asyncio.to_thread(parse_body, raw, problem) if len(raw) > INLINE_JSON_BYTES else parse_body(raw, problem)
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


INLINE_JSON_BYTES = 256 * 1024
NUMBERS_BLOCK = 4 * 1024 * 1024
# The flat number list of {"inputs": {"array": [...]}}: parsed straight into a float32 array, never a Python
# list of floats (32 bytes a sample: a 95-MB body took +1.5 GB that way).
_SAMPLES_ARRAY = re.compile(rb'"array"\s*:\s*\[')


def parse_body(raw: bytes, problem: str) -> Any:
    """The endpoint's JSON body, its samples array (when it has one, flat) read by numpy from the
    text itself; anything else parsed as JSON (``parse_json``)."""
    match = _SAMPLES_ARRAY.search(raw)
    if match is not None:
        opened, closed = match.end() - 1, raw.find(b"]", match.end())
        flat = closed > 0 and raw.find(b"[", opened + 1, closed) < 0 and raw.find(b"{", opened + 1, closed) < 0
        samples = _numbers(memoryview(raw)[opened + 1 : closed]) if flat else None
        if samples is not None:
            rest = parse_json(raw[:opened] + b"[]" + raw[closed + 1 :], problem)
            inputs = rest.get("inputs") if isinstance(rest, dict) else None
            if isinstance(inputs, dict) and inputs.get("array") == []:
                inputs["array"] = samples
                return rest
    return parse_json(raw, problem)


def _numbers(text: memoryview) -> np.ndarray | None:
    """The comma-separated numbers of ``text`` as float32, read about ``NUMBERS_BLOCK`` bytes at a
    time (no copy of the whole text, no list of Python floats), or None when it is not just numbers."""
    if len(text) < 64 and not bytes(text).strip():  # []
        return np.zeros(0, dtype=np.float32)
    blocks, start = [], 0
    while True:
        cut = -1 if len(text) - start <= NUMBERS_BLOCK else bytes(text[start : start + NUMBERS_BLOCK]).rfind(b",")
        end = len(text) if cut < 0 else start + cut
        if cut == 0:
            return None
        block = bytes(text[start:end])
        try:
            values = np.fromstring(block.decode("ascii"), dtype=np.float64, sep=",")  # text mode: no list of Python floats
        except (UnicodeDecodeError, ValueError):
            return None
        if values.size != block.count(b",") + 1:  # a token that is not a number (true, "x", a stray comma)
            return None
        blocks.append(values.astype(np.float32))  # beyond float range becomes inf, refused with NaN by from_array
        if end == len(text):
            return np.concatenate(blocks)
        start = end + 1


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
