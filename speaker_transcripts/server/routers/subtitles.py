"""``POST /v1/subtitles``: timed words with their speakers, as SRT or WebVTT by the service's own rules.

The page builds its downloads from what it shows, corrections and renames included; its subtitles come
from here so that they keep the rules every other route keeps (``output.formats.SubtitleRules``: two
balanced lines of 42 characters, at most 7 s a cue, a new cue for a new speaker). No model runs.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, Field

from speaker_transcripts.output.formats import render
from speaker_transcripts.server.middleware import BEARER

router = APIRouter(dependencies=[Depends(BEARER)])  # documents the scheme; HeaderGate checks the key

MEDIA_TYPES = {"srt": "application/x-subrip", "vtt": "text/vtt"}


class TimedWord(BaseModel):
    text: str = Field(max_length=200, description="the word as written, with the space before it")
    start: float = Field(ge=0, le=86_400)
    end: float = Field(ge=0, le=86_400)
    speaker: str | None = Field(default=None, max_length=200, description="the name to show, or none")


class SubtitleRequest(BaseModel):
    format: Literal["srt", "vtt"]
    words: list[TimedWord] = Field(max_length=200_000)


@router.post("/v1/subtitles", response_class=Response, responses={200: {"content": {media: {} for media in MEDIA_TYPES.values()}}})
async def subtitles(request: SubtitleRequest) -> Response:
    """The words as subtitles: cues of at most two balanced lines, each with its speaker."""
    result = {"chunks": [{"text": word.text, "timestamp": [word.start, max(word.start, word.end)], "speaker": word.speaker}
                         for word in request.words]}
    text = await run_in_threadpool(render, result, request.format)  # 200,000 words take a moment: not on the event loop
    return Response(text, media_type=f"{MEDIA_TYPES[request.format]}; charset=utf-8")
