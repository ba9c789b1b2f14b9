"""OpenAI's audio API: ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``.

OpenAI's multipart form (``file``, ``model``, ``response_format``, ``timestamp_granularities[]``,
``stream``, ...) with our extensions for diarization and decoding; the answer in the format asked
for (``openai_format``), or server-sent events as OpenAI streams transcriptions.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field

from speaker_transcripts.config import timed_by_words
from speaker_transcripts.errors import InvalidRequestError, shown
from speaker_transcripts.output.formats import SUBTITLE_FORMATS
from speaker_transcripts.server.errors import ServiceError, status_of
from speaker_transcripts.server.inference import infer
from speaker_transcripts.server.middleware import BEARER
from speaker_transcripts.server.openai_format import (
    MODEL_NAME,
    STREAMABLE_FORMATS,
    TEXT_FORMATS,
    DiarizedTranscription,
    Granularity,
    ResponseFormat,
    TranscriptionJson,
    VerboseTranscription,
    closing_events,
    delta_event,
    diarized_json,
    render_text,
    return_timestamps_for,
    verbose_json,
)

# A form field may hold a known speaker's clip as a data URL: up to 30 s (MAX_REFERENCE_S) of 48-kHz stereo
# 16-bit WAV is 7.7 MB in base64, and Starlette's default of 1 MB a part refused a 29.9-s 16-kHz clip.
MAX_FORM_PART_BYTES = 8 * 1024 * 1024


class ClipFieldsRoute(APIRoute):
    """A route whose form is parsed with parts of up to ``MAX_FORM_PART_BYTES`` (the whole body stays
    within ``MAX_UPLOAD_MB``); FastAPI then reads the form Starlette has kept."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def with_clip_fields(request: Request) -> Response:
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                await request.form(max_part_size=MAX_FORM_PART_BYTES)
            return await handler(request)

        return with_clip_fields


router = APIRouter(dependencies=[Depends(BEARER)], route_class=ClipFieldsRoute)  # documents the scheme; HeaderGate checks the key
AudioUpload = Annotated[UploadFile, File(description="the audio file (any common container)")]


class KnownSpeakerFields(BaseModel):
    """OpenAI's two parallel form arrays naming the voices to recognise, and the voice library's people
    to name (also on the diarization route)."""

    known_speaker_names: list[str] = Field(
        default_factory=list, alias="known_speaker_names[]", description="names for the voices in known_speaker_references[]"
    )
    known_speaker_references: list[str] = Field(
        default_factory=list, alias="known_speaker_references[]",
        description="a few seconds of each known speaker, as data: URLs (or base64), in the order of known_speaker_names[]",
    )
    voices: list[str] | None = Field(
        default=None, alias="voices[]",
        description="the people of the server's voice library (GET /v1/voices) who may be named; absent: all of them, one empty value: none",
    )

    def chosen_voices(self) -> list[str] | None:
        """``voices[]`` as the handler's ``voices`` (an empty value chooses nobody)."""
        return None if self.voices is None else [name for name in self.voices if name.strip()]

    def known_speakers(self) -> list[dict[str, str]] | None:
        """The two arrays as the handler's ``known_speakers`` list (one meaning on every surface)."""
        names, references = self.known_speaker_names, self.known_speaker_references
        if len(names) != len(references):
            raise InvalidRequestError(
                f"known_speaker_names[] has {len(names)} entries and known_speaker_references[] {len(references)}; "
                "send one reference clip per name, in the same order"
            )
        return [{"name": name, "audio": audio} for name, audio in zip(names, references, strict=True)] or None


def check_model_name(model: str) -> None:
    """``model`` is accepted and echoed in ``X-Model``: a name of letters, digits and ``._:/@+-``, at most
    128 characters, or a 400 before the audio is read (CR, LF or a non-Latin-1 character went into a
    header after the whole inference: a 500, or a dropped connection)."""
    if not MODEL_NAME.fullmatch(model):
        raise InvalidRequestError(
            f"model {shown(model)} is not a model name (letters, digits and ._:/@+- only, at most 128); "
            "any name is accepted, the server's ASR_MODEL decodes"
        )


class OpenAIOptions(KnownSpeakerFields):
    """The OpenAI audio API's form fields, plus our diarization and decoding extensions."""

    model: str = Field(default="whisper-1", description="accepted for compatibility; the server's ASR_MODEL decodes")
    prompt: str | None = None
    response_format: ResponseFormat = "json"
    temperature: float = Field(default=0.0, ge=0.0, le=1.0, description="only 0 (deterministic decoding) is supported")
    timestamp_granularities: list[Granularity] = Field(default_factory=list, alias="timestamp_granularities[]")
    diarize: bool | None = Field(default=None, description="default: diarize when a diarization model is loaded")
    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None
    assisted: bool | None = None
    stream: bool = Field(default=False, description="answer with server-sent events as the audio is decoded")
    progress: bool = Field(
        default=False,
        description="with stream: also transcript.progress events (this server's), the stage now and the seconds of audio "
        "decoded, for a progress bar that moves before the first words",
    )
    return_speaker_embeddings: bool | None = None


class TranscriptionOptions(OpenAIOptions):
    language: str | None = None

openai_responses: dict[int | str, dict[str, Any]] = {
    200: {"content": {media: {"schema": {"type": "string"}} for media in TEXT_FORMATS.values()}}
}
openai_model = TranscriptionJson | VerboseTranscription | DiarizedTranscription

@router.post("/v1/audio/transcriptions", response_model=openai_model, responses=openai_responses)
async def transcriptions(
    request: Request,
    file: AudioUpload,
    options: Annotated[TranscriptionOptions, Form()],
) -> Response:
    """OpenAI-compatible transcription, with speaker labels when diarizing."""
    return await openai_transcription(request, file, options, "transcribe", options.language)

@router.post("/v1/audio/translations", response_model=openai_model, responses=openai_responses)
async def translations(
    request: Request,
    file: AudioUpload,
    options: Annotated[OpenAIOptions, Form()],
) -> Response:
    """OpenAI-compatible translation into English, with speaker labels when diarizing."""
    return await openai_transcription(request, file, options, "translate", None)

async def openai_transcription(
    request: Request,
    file: UploadFile,
    options: OpenAIOptions,
    task: Literal["transcribe", "translate"],
    language: str | None,
) -> Response:
    check_model_name(options.model)
    if options.temperature > 0:
        raise InvalidRequestError("temperature sampling is not supported: this server decodes deterministically (send 0)")
    parameters = {
        "task": task,
        "language": language,
        "prompt": options.prompt,
        "return_timestamps": return_timestamps_for(options.timestamp_granularities),
        "diarize": True if options.response_format == "diarized_json" else options.diarize,
        "num_speakers": options.num_speakers,
        "min_speakers": options.min_speakers,
        "max_speakers": options.max_speakers,
        "assisted": options.assisted,
        "known_speakers": options.known_speakers(),
        "voices": options.chosen_voices(),
        "return_speaker_embeddings": options.return_speaker_embeddings,
    }
    parameters = {name: value for name, value in parameters.items() if value is not None}
    if options.response_format in SUBTITLE_FORMATS:
        parameters = timed_by_words(parameters, request.app.state.handler.capabilities)
    audio = await file.read()
    data = {"inputs": audio, "parameters": parameters}
    work = noting_the_model(request, options.model)
    if options.stream:
        if options.response_format not in STREAMABLE_FORMATS:
            raise InvalidRequestError(
                f"stream=true answers with server-sent events; send response_format {', '.join(STREAMABLE_FORMATS)}, "
                f"not {options.response_format}"
            )
        return await streamed(request, data, work, progress=options.progress)
    result = await infer(request, data, work=work)
    headers = {"X-Model": options.model}
    if options.response_format in TEXT_FORMATS:
        media = TEXT_FORMATS[options.response_format]
        return Response(render_text(result, options.response_format), media_type=f"{media}; charset=utf-8", headers=headers)
    body: BaseModel
    if options.response_format == "verbose_json":
        body = verbose_json(result, task, options.timestamp_granularities)
    elif options.response_format == "diarized_json":
        body = diarized_json(result, task)
    else:
        body = TranscriptionJson(text=result["text"])
    return JSONResponse(body.model_dump(exclude_none=True), headers=headers)


class Model(BaseModel):
    """An entry of ``GET /v1/models``, as OpenAI's API lists models."""

    id: str
    object: Literal["model"] = "model"
    created: int = Field(description="when this server loaded it (Unix seconds)")
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


# OpenAI's transcription models, which clients name (the docs' examples send whisper-1): each is
# listed, and answered, as an alias of the ASR model that decodes every request.
OPENAI_MODEL_NAMES = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-4o-transcribe-diarize")


def noting_the_model(request: Request, model: str) -> Callable[..., dict[str, Any]] | None:
    """The handler, with a warning in its answer when ``model`` names neither the loaded ASR model nor one
    of OpenAI's names for it (``whisper-large-v9``): the client should know another model decoded it."""
    handler = request.app.state.handler
    known = {entry.id for entry in loaded_models(request)}
    if model in known:
        return None
    note = (f"model {shown(model)} is not served here; {handler.configured.asr_model} decoded this request "
            "(GET /v1/models lists the names this server answers to)")

    def decoded(data: dict[str, Any], **callbacks: Any) -> dict[str, Any]:
        result = handler(data, **callbacks)
        return {**result, "warnings": [*result.get("warnings", []), note]}

    return decoded


def loaded_models(request: Request) -> list[Model]:
    """The ASR model that decodes every request (whatever ``model`` a client sends), then OpenAI's
    model names as its aliases."""
    name = request.app.state.handler.configured.asr_model
    owner = name.split("/", 1)[0] if "/" in name else "speaker-transcripts"
    created = int(request.app.state.loaded_at)
    aliases = [Model(id=alias, created=created, owned_by=f"speaker-transcripts (decoded by {name})") for alias in OPENAI_MODEL_NAMES]
    return [Model(id=name, created=created, owned_by=owner), *aliases]


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request) -> ModelList:
    """The loaded ASR model, in OpenAI's list shape."""
    return ModelList(data=loaded_models(request))


@router.get("/v1/models/{model_id:path}", response_model=Model)
async def retrieve_model(request: Request, model_id: str) -> Model:
    """One model by id (the loaded one or an OpenAI name for it); 404 for any other id."""
    for model in loaded_models(request):
        if model.id == model_id:
            return model
    raise ServiceError(404, f"the model {model_id!r} is not served here; GET /v1/models lists what is")


async def streamed(
    request: Request, data: dict[str, Any], work: Callable[..., dict[str, Any]] | None = None, progress: bool = False
) -> Response:
    """Server-sent events as OpenAI streams transcriptions: a ``transcript.text.delta`` per
    decoded chunk, then the segments (with speakers) and ``transcript.text.done``; with
    ``progress``, ``transcript.progress`` events too (``ProgressEvents``).

    The response starts with the first event, so a request the handler refuses (bad audio
    or parameters, audio too long, a full queue) still gets its 4xx; a failure after that
    arrives as an ``error`` event, the only way left to tell the client."""
    loop = asyncio.get_running_loop()
    events_in: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    put = functools.partial(loop.call_soon_threadsafe, events_in.put_nowait)
    first_delta = [True]

    def on_segment(chunk: Any) -> None:
        put(delta_event(chunk, first_delta[0]))
        first_delta[0] = False

    callbacks: dict[str, Any] = {"on_segment": on_segment}
    if progress:
        callbacks |= ProgressEvents(put).callbacks()
    work = asyncio.ensure_future(infer(request, data, work=work, **callbacks))
    next_event = asyncio.ensure_future(events_in.get())
    await asyncio.wait({work, next_event}, return_when=asyncio.FIRST_COMPLETED)
    if not next_event.done() and work.exception() is not None:
        next_event.cancel()
        raise work.exception()  # answered by the error handlers, as without streaming

    async def events() -> AsyncIterator[str]:
        waiting = next_event
        while True:  # events are queued before the work is marked done, so none is lost
            done, _ = await asyncio.wait({waiting, work}, return_when=asyncio.FIRST_COMPLETED)
            if waiting not in done:
                break
            yield _server_sent(waiting.result())
            waiting = asyncio.ensure_future(events_in.get())
        waiting.cancel()
        while not events_in.empty():
            yield _server_sent(events_in.get_nowait())
        if work.exception() is not None:
            status, message = status_of(work.exception())
            kind = "invalid_request_error" if status < 500 else "server_error"
            yield _server_sent({"type": "error", "error": {"message": message, "type": kind, "code": status}})
            return
        for event in closing_events(work.result()):
            yield _server_sent(event)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


class ProgressEvents:
    """``transcript.progress`` events from the handler's ``on_stage`` ("finding speech", "transcribing",
    "diarizing") and ``on_progress`` (seconds of audio decoded, moving with the decoder's steps): one
    per stage, and one per ``STEP_S`` of audio decoded, so a 3-hour file does not send thousands."""

    STEP_S = 0.5

    def __init__(self, put: Callable[[dict[str, Any]], Any]) -> None:
        self.put, self.stage, self.seconds = put, "", 0.0

    def callbacks(self) -> dict[str, Callable[..., None]]:
        return {"on_stage": self.on_stage, "on_progress": self.on_progress}

    def on_stage(self, stage: str) -> None:
        self.stage = stage
        self._send()

    def on_progress(self, seconds: float) -> None:
        if seconds >= self.seconds + self.STEP_S:
            self.seconds = seconds
            self._send()

    def _send(self) -> None:
        self.put({"type": "transcript.progress", "stage": self.stage, "seconds": round(self.seconds, 2)})


def _server_sent(event: dict[str, Any]) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n"


