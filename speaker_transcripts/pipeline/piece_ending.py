"""Whisper writes each speech-aligned piece to its end in one pass, instead of two.

transformers (5.24) decodes even a short input the way it decodes long audio: when Whisper opens a
segment and then ends its text ("the next segment runs past the window"), transformers decodes again
from that timestamp with a fresh 30-s window, a second encoder pass for a second or two of audio. A
piece never cuts speech, though: it ends in a pause (``long_form.py``), so there is nothing past the
window to wait for. Where Whisper opens a segment more than ``END_MARGIN_S`` before its piece's audio
ends, ``FinishEachPiece`` takes end-of-text away, Whisper writes there the segment the second pass
would have written, and transformers is told to make one pass (``force_unique_generate_call``).
Fewer encoder passes, the same words or better (CHANGELOG.md, CPU speed, fourth pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import LogitsProcessor

TIMESTAMP_S = 0.02  # Whisper's timestamp tokens are 20 ms apart, from <|0.00|>
# An opening timestamp this close to the piece's end may end the text: there is nothing left to
# write, and text that starts in the last 0.1 s is dropped anyway (long_form.TAIL_S).
END_MARGIN_S = 0.3


class FinishEachPiece(LogitsProcessor):
    """Forbid end-of-text right after an opening timestamp that lies more than ``END_MARGIN_S``
    before the end of the row's audio. ``piece_seconds`` holds, for the next ``generate`` call,
    each input's audio length in order; rows are those inputs (times ``num_beams`` for beam
    search, each input's beams together). Rows that do not match (none set) are left alone."""

    def __init__(self, generation_config: Any) -> None:
        self.timestamp_begin = generation_config.no_timestamps_token_id + 1
        self.end_of_text = generation_config.eos_token_id
        self.begin_index = 0
        self.piece_seconds: Sequence[float] = ()

    def set_begin_index(self, begin_index: int) -> None:
        """Where generated tokens start (transformers sets it on every processor that has it)."""
        self.begin_index = begin_index

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = input_ids[:, self.begin_index :]
        rows = input_ids.shape[0]
        if not self.piece_seconds or rows % len(self.piece_seconds) or generated.shape[1] == 0:
            return scores
        ends = torch.tensor(self.piece_seconds, device=scores.device).repeat_interleave(rows // len(self.piece_seconds))
        last = generated[:, -1]
        after_timestamp = generated[:, -2] >= self.timestamp_begin if generated.shape[1] > 1 else torch.ones_like(last, dtype=torch.bool)
        opening = (last >= self.timestamp_begin) & after_timestamp
        too_early = opening & ((last - self.timestamp_begin) * TIMESTAMP_S < ends - END_MARGIN_S)
        if not too_early.any():
            return scores
        scores = scores.clone()
        scores[too_early, self.end_of_text] = -float("inf")
        return scores
