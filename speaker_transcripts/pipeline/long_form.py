"""Speech-aligned long-form decoding: which stretches of a file Whisper decodes, and how their
transcripts go back on the file's clock.

Whisper sees 30 s at a time. The transformers chunked pipeline cuts the file into overlapping
30-s windows wherever the clock says, decodes silence as if it were speech (where Whisper
hallucinates) and stitches the windows' tokens back together, which merges Whisper's segments
across windows: a 59-s stand-up came back as one 48-s segment. Here the voice activity
detector's speech regions are packed into pieces of at most one window, cut only in the pauses
between regions, and each piece is decoded on its own (in batches). Silence between pieces is
never decoded, Whisper's own segments survive, and every piece starts at speech, so times are
as exact as Whisper makes them. This is what whisperX and faster-whisper's batched pipeline do.

Pure arithmetic on sample indices, without torch: the rules are tested directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

PIECE_PAD_S = 0.2  # context either side of the speech, so the first and last words are whole
# Whisper writes a last segment into the padding it adds up to 30 s ("you", "Thank you."):
# text that starts this close to the end of a piece, or later, was not in the piece.
TAIL_S = 0.1


@dataclass(frozen=True)
class Piece:
    """One stretch of audio decoded on its own: samples ``[start, end)`` of the file."""

    start: int
    end: int

    def seconds(self, sampling_rate: int) -> tuple[float, float]:
        return self.start / sampling_rate, self.end / sampling_rate


def plan_pieces(
    speech: Sequence[tuple[int, int]], total: int, max_samples: int, pad: int
) -> list[Piece]:
    """Pack speech regions (``[start, end)`` sample spans in time order) into pieces.

    Neighbouring regions join while the piece, padding included, stays within
    ``max_samples``; a region longer than that is cut into equal parts (the detector is asked
    to split long speech at its pauses first, so this is the rare case of a pause-less minute).
    Each piece gets up to ``pad`` samples of context either side, never past the middle of the
    pause to its neighbour, so pieces never overlap and no sample is decoded twice.
    """
    room = max_samples - 2 * pad
    if room <= 0:
        raise ValueError(f"a piece of {max_samples} samples has no room inside {pad} samples of padding either side")
    spans: list[list[int]] = []
    for start, end in _split_long(speech, room):
        if spans and end - spans[-1][0] <= room:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    pieces = []
    for index, (start, end) in enumerate(spans):
        previous_end = spans[index - 1][1] if index else 0
        next_start = spans[index + 1][0] if index + 1 < len(spans) else total
        left = max(start - pad, (previous_end + start) // 2 if index else 0)
        right = min(end + pad, (end + next_start + 1) // 2 if index + 1 < len(spans) else total)
        pieces.append(Piece(start=max(left, 0), end=min(right, total)))
    return pieces


def _split_long(speech: Iterable[tuple[int, int]], room: int) -> Iterable[tuple[int, int]]:
    for start, end in speech:
        parts = -(-(end - start) // room)  # ceiling division
        for part in range(parts):
            yield start + (end - start) * part // parts, start + (end - start) * (part + 1) // parts


def on_file_clock(raw_chunks: Iterable[dict[str, Any]], piece: Piece, sampling_rate: int) -> list[dict[str, Any]]:
    """A piece's pipeline chunks (times from the piece's start) with times on the file's clock.

    Chunks that start in the last ``TAIL_S`` of the piece or beyond are dropped (Whisper wrote
    them into its own padding); an end past the piece, or open, becomes the piece's end, and a
    missing start the previous chunk's end (or the piece's start), so every time is a number.
    """
    offset, piece_end = piece.seconds(sampling_rate)
    length = piece_end - offset
    placed: list[dict[str, Any]] = []
    for chunk in raw_chunks:
        start, end = (tuple(chunk.get("timestamp") or ()) + (None, None))[:2]
        if start is not None and start >= length - TAIL_S:
            continue
        start = offset + start if start is not None else (placed[-1]["timestamp"][1] if placed else offset)
        end = offset + (length if end is None else min(end, length))
        placed.append({**chunk, "timestamp": (start, end)})
    return placed
