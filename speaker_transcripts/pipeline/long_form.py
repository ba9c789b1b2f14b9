"""Speech-aligned long-form decoding: which stretches of a file Whisper decodes, and how their
transcripts go back on the file's clock.

Whisper sees 30 s at a time. The transformers chunked pipeline cuts the file into overlapping 30-s
windows wherever the clock says, decodes silence (where Whisper hallucinates) and merges Whisper's
segments across windows. Here the voice activity detector's speech regions are packed into pieces of
at most one window, cut only in pauses, and each piece is decoded on its own (in batches). Inside a
piece a pause longer than ``MAX_PAUSE_S`` is cut to that, as faster-whisper's batched pipeline
splices its speech, so a window holds speech rather than silence. Silence is never decoded, Whisper's
own segments survive, and times go back on the file's clock span by span (docs/design.md; figures in
docs/performance.md, Long form).

Pure arithmetic on sample indices, without torch: the rules are tested directly.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Any

import numpy as np

from speaker_transcripts.pipeline.samples import as_float32

PIECE_PAD_S = 0.2  # context either side of the speech, so the first and last words are whole
# Whisper writes a last segment into the padding it adds up to 30 s ("you", "Thank you."):
# text that starts this close to the end of a piece, or later, was not in the piece.
TAIL_S = 0.1
# A longer pause between speech regions inside a piece is cut to this. Measured on the dev files
# and the 10-min file (WER): pauses cut to 0.4 s cost the short dev files words (7.5 -> 8.7 %),
# at 2 s one piece of the 10-min file lost its text once (13.2 %), at 1 s 7.5 % and 8.5 %
# (9.4 % when no pause was cut).
MAX_PAUSE_S = 1.0


@dataclass(frozen=True)
class Piece:
    """One stretch of audio decoded on its own: the file's samples ``[start, end)`` of each of
    ``spans`` (in time order, never overlapping), played back to back."""

    spans: tuple[tuple[int, int], ...]

    @property
    def start(self) -> int:
        return self.spans[0][0]

    @property
    def end(self) -> int:
        return self.spans[-1][1]

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Where each span starts on the piece's clock, in samples, and (last) the piece's length."""
        return tuple(accumulate((end - start for start, end in self.spans), initial=0))

    @property
    def length(self) -> int:
        """Samples Whisper hears: the spans' lengths, without the pauses cut out between them."""
        return self.offsets[-1]

    def audio(self, samples: np.ndarray) -> np.ndarray:
        """The piece's samples as Whisper takes them: float32 (a request holds 16-bit, ``samples.py``)."""
        if len(self.spans) == 1:
            return as_float32(samples[self.start : self.end])
        return as_float32(np.concatenate([samples[start:end] for start, end in self.spans]))

    def on_file_clock(self, start: float, end: float, sampling_rate: int) -> tuple[float, float]:
        """A chunk's times on the piece's clock (seconds from its first sample) on the file's.

        A chunk that runs from one span into a later one keeps both ends, unless the pause cut
        out between them is longer than the chunk itself: Whisper heard no such pause, so that
        is a timestamp that slipped past the cut (a 3-s segment came back 29 s long, across a
        27-s silence), and the chunk stays in the span that holds most of it.
        """
        offsets = self.offsets
        first = self._span_at(offsets, start * sampling_rate, bisect_right)
        last = self._span_at(offsets, end * sampling_rate, bisect_left)
        cut_out = (self.spans[last][0] - offsets[last]) - (self.spans[first][0] - offsets[first])
        if first != last and cut_out > (end - start) * sampling_rate:
            shares = [
                min(end * sampling_rate, offsets[index + 1]) - max(start * sampling_rate, offsets[index])
                for index in range(first, last + 1)
            ]
            first = last = first + shares.index(max(shares))
            start, end = max(start, offsets[first] / sampling_rate), min(end, offsets[first + 1] / sampling_rate)
        return (
            (self.spans[first][0] - offsets[first]) / sampling_rate + start,
            (self.spans[last][0] - offsets[last]) / sampling_rate + end,
        )

    def _span_at(self, offsets: Sequence[int], sample: float, find: Callable[[Sequence[int], float], int]) -> int:
        """The span a piece-clock sample falls in; where two meet, ``bisect_right`` takes the
        later one (for a start) and ``bisect_left`` the earlier one (for an end)."""
        return min(max(find(offsets, sample) - 1, 0), len(self.spans) - 1)


def plan_pieces(
    speech: Sequence[tuple[int, int]], total: int, max_samples: int, pad: int, max_pause: int
) -> list[Piece]:
    """Pack speech regions (``[start, end)`` sample spans in time order) into pieces.

    Neighbouring regions join while the piece stays within ``max_samples``: a pause between
    them of up to ``max_pause`` samples is kept whole, a longer one is cut to ``max_pause`` (its
    two ends kept, its middle cut out), so Whisper still hears a pause there. A region longer
    than a piece is cut into equal parts (the detector is asked to split long speech at its
    pauses first, so this is the rare case of a pause-less minute). Each piece gets up to
    ``pad`` samples of context either side, never past the middle of the pause to its
    neighbour, so no sample is decoded twice.
    """
    room = max_samples - 2 * pad
    if room <= 0:
        raise ValueError(f"a piece of {max_samples} samples has no room inside {pad} samples of padding either side")
    if max_pause < 2 * pad:
        raise ValueError(f"a pause kept inside a piece ({max_pause} samples) must hold the {pad} samples of context either side")
    regions = list(_split_long(speech, room))
    groups: list[list[int]] = []  # indices of the regions each piece holds
    length = 0
    for index, (start, end) in enumerate(regions):
        if groups:
            previous = regions[index - 1][1]
            joined = length - _context_after(regions, index - 1, total, pad) + min(start - previous, max_pause)
            joined += end - start + _context_after(regions, index, total, pad)
            if joined <= max_samples:
                groups[-1].append(index)
                length = joined
                continue
        groups.append([index])
        length = _context_before(regions, index, pad) + end - start + _context_after(regions, index, total, pad)
    return [_piece(regions, group, total, pad, max_pause) for group in groups]


def _context_before(regions: Sequence[tuple[int, int]], index: int, pad: int) -> int:
    start = regions[index][0]
    return start - max(start - pad, (regions[index - 1][1] + start) // 2 if index else 0)


def _context_after(regions: Sequence[tuple[int, int]], index: int, total: int, pad: int) -> int:
    end = regions[index][1]
    return min(end + pad, (end + regions[index + 1][0] + 1) // 2 if index + 1 < len(regions) else total) - end


def _piece(regions: Sequence[tuple[int, int]], group: Sequence[int], total: int, pad: int, max_pause: int) -> Piece:
    first, last = group[0], group[-1]
    spans = [[regions[first][0] - _context_before(regions, first, pad), regions[first][1]]]
    for index in group[1:]:
        start, end = regions[index]
        pause = start - spans[-1][1]
        if pause <= max_pause:
            spans[-1][1] = end
        else:
            spans[-1][1] += max_pause // 2
            spans.append([start - (max_pause - max_pause // 2), end])
    spans[-1][1] += _context_after(regions, last, total, pad)
    return Piece(spans=tuple((start, end) for start, end in spans))


def _split_long(speech: Iterable[tuple[int, int]], room: int) -> Iterable[tuple[int, int]]:
    for start, end in speech:
        parts = -(-(end - start) // room)  # ceiling division
        for part in range(parts):
            yield start + (end - start) * part // parts, start + (end - start) * (part + 1) // parts


def on_file_clock(raw_chunks: Iterable[dict[str, Any]], piece: Piece, sampling_rate: int) -> list[dict[str, Any]]:
    """A piece's pipeline chunks (times on the piece's clock) with times on the file's clock.

    Chunks that start in the last ``TAIL_S`` of the piece or beyond are dropped (Whisper wrote
    them into its own padding); an end past the piece, or open, becomes the piece's end, and a
    missing start the previous chunk's end (or the piece's start), so every time is a number.
    """
    length = piece.length / sampling_rate
    placed: list[dict[str, Any]] = []
    previous_end = 0.0  # on the piece's clock
    for chunk in raw_chunks:
        start, end = (tuple(chunk.get("timestamp") or ()) + (None, None))[:2]
        if start is not None and start >= length - TAIL_S:
            continue
        start = previous_end if start is None else start
        end = length if end is None else max(start, min(end, length))
        placed.append({**chunk, "timestamp": piece.on_file_clock(start, end, sampling_rate)})
        previous_end = end
    return placed
