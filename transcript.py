"""Timed pieces of transcript, shared by ASR, the speaker merge and the response.

Pure data and arithmetic on it: no torch, so the rules (every timestamp closed and inside the
audio) are tested directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

TIMESTAMP_DECIMALS = 2  # Whisper's timestamp tokens are 20 ms apart


@dataclass(frozen=True)
class Chunk:
    """A piece of recognised text with where it lies in the audio, in seconds."""

    text: str
    start: float
    end: float

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "timestamp": [self.start, self.end]}


def close_timestamps(raw_chunks: Iterable[dict[str, Any]], duration: float) -> list[Chunk]:
    """Turn pipeline chunks (``{"text", "timestamp": (start, end)}``) into closed ``Chunk``s.

    Whisper leaves the last chunk's end open (``None``) when the audio stops mid-segment, and
    a random or confused model can emit a start without an end or times beyond the audio.
    Every time becomes a number in ``[0, duration]``: a missing start takes the previous end,
    a missing end the next start (or the audio's end), and an end never precedes its start.
    """
    chunks = list(raw_chunks)
    starts = [_clamp(chunk["timestamp"][0], duration) for chunk in chunks]
    ends = [_clamp(chunk["timestamp"][1], duration) for chunk in chunks]
    closed: list[Chunk] = []
    previous_end = 0.0
    for index, chunk in enumerate(chunks):
        start = starts[index] if starts[index] is not None else previous_end
        end = ends[index]
        if end is None:
            following = next((s for s in starts[index + 1 :] if s is not None), None)
            end = following if following is not None and following >= start else duration
        end = max(end, start)
        closed.append(Chunk(text=chunk["text"], start=_round(start), end=_round(end)))
        previous_end = end
    return closed


def joined_text(pieces: Sequence[Chunk]) -> str:
    """The text of consecutive pieces, as Whisper spaced it, without outer whitespace."""
    return "".join(piece.text for piece in pieces).strip()


def _clamp(value: float | None, duration: float) -> float | None:
    if value is None:
        return None
    return min(max(float(value), 0.0), duration)


def _round(seconds: float) -> float:
    return float(round(seconds, TIMESTAMP_DECIMALS))


SENTENCE_ENDINGS = (".", "?", "!", "。", "？", "！", "…")
MAX_PAUSE_IN_SEGMENT_S = 1.0
MAX_SEGMENT_S = 30.0


def group_words(words: Sequence[Chunk], speakers: Sequence[str] | None = None) -> list[Chunk]:
    """Join word chunks into segments the way subtitles read: a segment ends after a word
    that ends a sentence, before a pause longer than a second, when it reaches 30 s, and
    (given each word's speaker) where the speaker changes."""
    segments: list[Chunk] = []
    current: list[Chunk] = []
    for index, word in enumerate(words):
        current.append(word)
        following = words[index + 1] if index + 1 < len(words) else None
        if (
            following is None
            or (speakers is not None and speakers[index] != speakers[index + 1])
            or word.text.strip().endswith(SENTENCE_ENDINGS)
            or following.start - word.end > MAX_PAUSE_IN_SEGMENT_S
            or following.end - current[0].start > MAX_SEGMENT_S
        ):
            segments.append(Chunk(text=joined_text(current), start=current[0].start, end=current[-1].end))
            current = []
    return segments
