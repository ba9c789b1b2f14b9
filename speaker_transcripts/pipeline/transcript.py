"""Timed pieces of transcript, shared by ASR, the speaker merge and the response.

Pure data and arithmetic on it: no torch, so the rules (every timestamp closed and inside the
audio) are tested directly.
"""

from __future__ import annotations

import re
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


def spelled(word: Chunk) -> str:
    """A word's letters and digits in lower case: how words are compared where Whisper's punctuation
    and case change between decodes ("morning" and "Morning," are one word)."""
    return "".join(character for character in word.text.lower() if character.isalnum())


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
# Titles and abbreviations whose full stop ends no sentence, in the languages Whisper writes most
# ("And Mr." was a segment, a cue and a plot bar of its own on the bundled sample).
ABBREVIATIONS = frozenset({
    # English, Latin (not "no.": it ends answers)
    "mr.", "mrs.", "ms.", "mx.", "dr.", "prof.", "sr.", "jr.", "st.", "mt.", "vs.", "cf.", "approx.", "dept.", "fig.", "vol.", "ca.", "gen.", "col.", "lt.", "sgt.", "capt.", "gov.", "sen.", "rep.", "rev.",
    # German
    "hr.", "fr.", "frl.", "nr.", "bzw.", "vgl.", "ggf.", "evtl.", "str.",
    # French
    "mme.", "mlle.", "mm.",
    # Spanish
    "sra.", "srta.", "dra.", "ud.", "uds.",
    # Italian
    "sig.", "dott.",
})
# Initials and dotted abbreviations: "J.", "U.S.", "e.g.", "z.B.", "a.m."
_DOTTED = re.compile(r"^(?:\w\.|(?:\w{1,2}\.){2,})$")
MAX_PAUSE_IN_SEGMENT_S = 1.0
# Long enough for a long sentence, short enough to read and to find in a recording.
MAX_SEGMENT_S = 15.0


def ends_sentence(text: str) -> bool:
    """Whether ``text`` (a word or a segment) ends a sentence: it ends with a full stop, question
    or exclamation mark that is not the dot of a title, an abbreviation or an initial."""
    stripped = text.strip()
    if not stripped.endswith(SENTENCE_ENDINGS):
        return False
    if not stripped.endswith("."):
        return True
    last = stripped.split()[-1].lower()
    return last not in ABBREVIATIONS and not (_DOTTED.match(last) and not last[:-1].isdigit())


def segment_ranges(pieces: Sequence[Chunk], speakers: Sequence[str] | None = None) -> list[range]:
    """Where sentence-sized segments begin and end, as index ranges over ``pieces`` (words, or
    Whisper's own segments): a segment ends after a piece that ends a sentence, before a pause
    longer than a second, before it would outgrow ``MAX_SEGMENT_S``, and (given each piece's
    speaker) where the speaker changes. Every piece lands in exactly one range, in order."""
    ranges: list[range] = []
    first = 0
    for index, piece in enumerate(pieces):
        following = pieces[index + 1] if index + 1 < len(pieces) else None
        if (
            following is None
            or (speakers is not None and speakers[index] != speakers[index + 1])
            or ends_sentence(piece.text)
            or following.start - piece.end > MAX_PAUSE_IN_SEGMENT_S
            or following.end - pieces[first].start > MAX_SEGMENT_S
        ):
            ranges.append(range(first, index + 1))
            first = index + 1
    return ranges


def group_words(words: Sequence[Chunk], speakers: Sequence[str] | None = None) -> list[Chunk]:
    """Join word chunks into the sentence-sized segments of ``segment_ranges``."""
    return [span_of(words[span.start : span.stop]) for span in segment_ranges(words, speakers)]


def span_of(pieces: Sequence[Chunk]) -> Chunk:
    """Consecutive pieces as one chunk: their text, from the first start to the last end."""
    return Chunk(text=joined_text(pieces), start=pieces[0].start, end=pieces[-1].end)
