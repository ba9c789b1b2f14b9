"""The OpenAI audio API's response shapes, built from the handler's response.

``/v1/audio/transcriptions`` and ``/v1/audio/translations`` answer in the format the client
asked for. Our extension is the ``speaker`` on segments and words (and the ``diarized_json``
format OpenAI defined for its diarizing model). Fields OpenAI fills from its own decoder
(``tokens``, ``avg_logprob``, ``compression_ratio``, ``no_speech_prob``, ``temperature``) are
left out rather than invented: the transformers pipeline does not report them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel
from transformers.models.whisper.tokenization_whisper import LANGUAGES

from speaker_transcripts.output.formats import cues_from_result, subtitle_cues, to_srt, to_vtt
from speaker_transcripts.pipeline.transcript import Chunk, group_words

# What a client may call the model it asks for (echoed in ``X-Model`` and in a live session's settings).
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")
ResponseFormat = Literal["json", "text", "srt", "vtt", "verbose_json", "diarized_json"]
Granularity = Literal["segment", "word"]
TEXT_FORMATS: dict[str, str] = {"text": "text/plain", "srt": "application/x-subrip", "vtt": "text/vtt"}


class TranscriptionJson(BaseModel):
    """``response_format=json``: the text only."""

    text: str


class Word(BaseModel):
    word: str
    start: float
    end: float
    speaker: str | None = None


class Segment(BaseModel):
    id: int
    start: float
    end: float
    text: str
    speaker: str | None = None


class VerboseTranscription(BaseModel):
    """``response_format=verbose_json``; ``warnings`` is ours (what was adjusted or ignored)."""

    task: Literal["transcribe", "translate"]
    language: str | None
    duration: float
    text: str
    segments: list[Segment] | None = None
    words: list[Word] | None = None
    warnings: list[str] = []


class DiarizedSegment(BaseModel):
    type: Literal["transcript.text.segment"] = "transcript.text.segment"
    id: str
    start: float
    end: float
    text: str
    speaker: str


class DiarizedTranscription(BaseModel):
    """``response_format=diarized_json``, the shape of OpenAI's diarizing transcription model."""

    task: Literal["transcribe", "translate"]
    duration: float
    text: str
    segments: list[DiarizedSegment]


def return_timestamps_for(granularities: Sequence[str]) -> Literal["segment", "word"]:
    """Word timestamps cost a little (alignment), so only when the client asks for words."""
    return "word" if "word" in granularities else "segment"


def render_text(result: Mapping[str, Any], response_format: str) -> str:
    """The body for the plain-text formats: ``text``, ``srt`` and ``vtt``."""
    if response_format == "text":
        return result["text"] + "\n"
    if response_format == "srt":
        return to_srt(subtitle_cues(result))
    return to_vtt(subtitle_cues(result, label_shown=False))


def verbose_json(
    result: Mapping[str, Any], task: Literal["transcribe", "translate"], granularities: Sequence[str]
) -> VerboseTranscription:
    """Segments (with speakers when diarized) and, when asked for, words."""
    chunks = result.get("chunks") or []
    word_level = return_timestamps_for(granularities) == "word"
    words = [
        Word(word=chunk["text"], start=chunk["timestamp"][0], end=chunk["timestamp"][1], speaker=chunk.get("speaker"))
        for chunk in chunks
    ] if word_level else None
    segments = None
    if "segment" in granularities or not granularities:
        segments = [
            Segment(id=index, start=start, end=end, text=text, speaker=speaker)
            for index, (start, end, text, speaker) in enumerate(_segments(result, word_level))
        ]
    return VerboseTranscription(
        task=task,
        language=language_name(result.get("language")),
        duration=result.get("duration") or 0.0,
        text=result["text"],
        segments=segments,
        words=words,
        warnings=list(result.get("warnings") or []),
    )


def diarized_json(result: Mapping[str, Any], task: Literal["transcribe", "translate"]) -> DiarizedTranscription:
    """One segment per speaker turn, as OpenAI's diarizing model answers."""
    segments = [
        DiarizedSegment(id=f"seg_{index}", start=cue.start, end=cue.end, text=cue.text, speaker=cue.speaker or "UNKNOWN")
        for index, cue in enumerate(cues_from_result({"speakers": result.get("speakers") or []}))
    ]
    return DiarizedTranscription(task=task, duration=result.get("duration") or 0.0, text=result["text"], segments=segments)


STREAMABLE_FORMATS = ("json", "text", "diarized_json")


def delta_event(chunk: Chunk, first: bool) -> dict[str, Any]:
    """``transcript.text.delta`` for one decoded chunk. The deltas concatenate to the final text;
    ``start``/``end`` (seconds) are our extension, so a client can show timed text as it comes."""
    text = chunk.text.lstrip() if first else chunk.text
    return {"type": "transcript.text.delta", "delta": text, "start": chunk.start, "end": chunk.end}


def closing_events(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """After the last delta: when diarized, one ``transcript.text.segment`` per speaker segment
    (speakers are only known once decoding is done; OpenAI's segment event always names one),
    then ``transcript.text.done``, with our extensions: the ``language``, the ``duration`` and, when
    diarized, the speaker timeline (``diarization``, overlaps kept)."""
    events: list[dict[str, Any]] = [
        {"type": "transcript.text.segment", "id": f"seg_{index}", "start": start, "end": end, "text": text, "speaker": speaker}
        for index, (start, end, text, speaker) in enumerate(_segments(result, word_level=False))
        if speaker
    ]
    done = {"type": "transcript.text.done", "text": result["text"], "warnings": list(result.get("warnings") or []),
            "language": result.get("language"), "duration": result.get("duration")}
    if "diarization" in result:  # our extension: who spoke when, overlaps kept (the page draws it)
        done["diarization"] = result["diarization"]
    events.append(done)
    return events


def language_name(code: str | None) -> str | None:
    """OpenAI reports the language by name (``english``), the handler by code (``en``)."""
    return LANGUAGES.get(code, code) if code else None


def _segments(result: Mapping[str, Any], word_level: bool) -> list[tuple[float, float, str, str | None]]:
    speakers = result.get("speakers") or []
    if speakers:
        return [(s["timestamp"][0], s["timestamp"][1], s["text"], s["speaker"]) for s in speakers]
    chunks = [Chunk(text=c["text"], start=c["timestamp"][0], end=c["timestamp"][1]) for c in result.get("chunks") or []]
    if word_level:
        chunks = group_words(chunks)
    return [(chunk.start, chunk.end, chunk.text, None) for chunk in chunks]
