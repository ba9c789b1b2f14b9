"""Whether a decoded piece repeats itself: the guard before its text is trusted.

Whisper loops: it writes a sentence again, or a phrase over and over, when it cannot stop or loses
its place. Whisper's own decoder and faster-whisper decode a window again when its text compresses too
well (gzip ratio over 2.4). That misses a single repeated sentence in 30 s of text, so a piece also
fails when a run of ``MIN_REPEAT_WORDS`` words (case and punctuation aside) occurs twice in it; a real
repetition costs one more decode, whose result is then kept (``asr.SpeechRecognizer`` decodes again
with end-of-text allowed, at rising temperatures while it still compresses like a loop).

A live session's interim decode is not decoded again: its buffer ends mid-speech, where Whisper often
writes the last word over and over to its token budget. ``repeated_tail`` finds such a tail, in the
tokens while they are generated (``loop_ending.EndLoops`` ends the row there) and in the words decoded
(the copies after the first are left out). docs/quality.md, "Repeated text: the loop guard". Pure
Python: tested without a model.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Hashable, Sequence

COMPRESSION_RATIO_LIMIT = 2.4  # Whisper's and faster-whisper's compression_ratio_threshold
MIN_REPEAT_WORDS = 4
# A tail is a loop when it holds this many copies of one unit back to back ("no, no, no," is said; a
# fourth copy rarely is) of at most ``LONGEST_UNIT`` items.
LOOP_COPIES = 4
LONGEST_UNIT = 16
_WORD = re.compile(r"[\w']+")


def compression_ratio(text: str) -> float:
    """Whisper's measure: the text's UTF-8 length over its zlib-compressed length."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def repeated_run(text: str, size: int = MIN_REPEAT_WORDS) -> str | None:
    """The first run of ``size`` words that occurs twice in ``text`` without the two occurrences
    overlapping, or None."""
    words = [word.lower() for word in _WORD.findall(text)]
    first_seen: dict[tuple[str, ...], int] = {}
    for index in range(len(words) - size + 1):
        run = tuple(words[index : index + size])
        seen = first_seen.setdefault(run, index)
        if index - seen >= size:
            return " ".join(run)
    return None


def repeated_tail(items: Sequence[Hashable], copies: int = LOOP_COPIES, longest_unit: int = LONGEST_UNIT) -> int:
    """How many items at the end of ``items`` repeat the unit before them, when the sequence ends
    with at least ``copies`` copies of one unit of up to ``longest_unit`` items back to back (the
    shortest such unit); 0 when it does not. ``items[:-n]`` keeps the first copy."""
    items = list(items)
    for size in range(1, min(longest_unit, len(items) // copies) + 1):
        unit = items[-size:]
        found = 1
        while (found + 1) * size <= len(items) and items[len(items) - (found + 1) * size : len(items) - found * size] == unit:
            found += 1
        if found >= copies:
            return (found - 1) * size
    return 0


def looping(text: str) -> str | None:
    """Why a piece's text looks like a loop, or None when it does not."""
    ratio = compression_ratio(text)
    if ratio > COMPRESSION_RATIO_LIMIT:
        return f"its text compresses {ratio:.1f}:1"
    run = repeated_run(text)
    return f"it repeats {run!r}" if run is not None else None
