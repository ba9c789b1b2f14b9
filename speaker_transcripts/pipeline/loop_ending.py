"""A decode that starts writing the same tokens over and over ends there, not at its token budget.

Only where the decode's text is not decoded again when it loops: a live session's interim decodes
(``asr.SpeechRecognizer.transcribe(retry_loops=False)``). Its buffer ends mid-speech, and Whisper
then often writes the last word again and again until its budget runs out (``repetition.py``); every
one of those steps costs as much as a step of real text, and the copies are left out of the words
anyway. The file path decodes a looping piece again with Whisper's fallback, which needs the whole
loop to see it: it keeps transformers' own stopping.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import LogitsProcessor

from speaker_transcripts.pipeline.repetition import repeated_tail

# The copies after the first must hold this many tokens before a row is ended: "Morning." (two tokens)
# is ended at its fourth copy, a one-token word at its seventh.
MIN_LOOP_TOKENS = 6


class EndLoops(LogitsProcessor):
    """Make end-of-text the only choice for a row whose generated text tokens (timestamps and other
    special tokens aside) end in a loop (``repetition.repeated_tail``)."""

    def __init__(self, generation_config: Any) -> None:
        self.end_of_text = generation_config.eos_token_id
        self.begin_index = 0

    def set_begin_index(self, begin_index: int) -> None:
        """Where generated tokens start (transformers sets it on every processor that has it)."""
        self.begin_index = begin_index

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        looping = [
            row for row, tokens in enumerate(input_ids[:, self.begin_index :].tolist())
            if repeated_tail([token for token in tokens if token < self.end_of_text]) >= MIN_LOOP_TOKENS
        ]
        if not looping:
            return scores
        scores = scores.clone()
        scores[looping] = -float("inf")
        scores[looping, self.end_of_text] = 0.0
        return scores
