"""Whisper's token suppression with its vocabulary mask built once per call, not at every step.

Whisper's ``generate`` (transformers 5.24) suppresses its ~90 non-speech tokens (``suppress_tokens``)
at every decoder step and ``begin_suppress_tokens`` at the first one, and both processors build
their mask again at every step: ``torch.isin`` of the whole vocabulary (51,865 tokens) against the
list, which sorts and deduplicates both, and the first-step processor builds it at every step too,
though it reads it at one. On the 2-core CPU that is about 3 ms a call, 6 ms a step, 0.66 s of a
1-min request's 5.7 s (109 steps, torch's profiler). ``with_masks_built_once`` swaps the two
processors for subclasses that build the same mask once for the call and apply it exactly as
transformers does, in the same place of the processor list, so the tokens are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers.generation.logits_process import SuppressTokensAtBeginLogitsProcessor, SuppressTokensLogitsProcessor


def vocabulary_mask(tokens: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """True at each of ``tokens`` in a vocabulary of ``scores.shape[-1]``, as ``torch.isin`` of the
    vocabulary against them gives it (ids outside the vocabulary mark nothing)."""
    vocabulary = scores.shape[-1]
    tokens = tokens.to(device=scores.device, dtype=torch.long)  # an empty list makes a float tensor
    mask = torch.zeros(vocabulary, dtype=torch.bool, device=scores.device)
    mask[tokens[(tokens >= 0) & (tokens < vocabulary)]] = True
    return mask


class _MaskCache:
    """The mask of one list of tokens, built for the first scores seen (vocabulary and device)."""

    def __init__(self, tokens: torch.Tensor) -> None:
        self.tokens = tokens
        self.mask: torch.Tensor | None = None

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        if self.mask is None or self.mask.shape[0] != scores.shape[-1] or self.mask.device != scores.device:
            self.mask = vocabulary_mask(self.tokens, scores)
        return self.mask


class SuppressTokensOnce(SuppressTokensLogitsProcessor):
    """transformers' ``SuppressTokensLogitsProcessor``, its mask built once."""

    def __init__(self, original: SuppressTokensLogitsProcessor) -> None:
        self.suppress_tokens = original.suppress_tokens
        self._mask = _MaskCache(self.suppress_tokens)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return torch.where(self._mask(scores), -float("inf"), scores)


class SuppressTokensAtBeginOnce(SuppressTokensAtBeginLogitsProcessor):
    """transformers' ``SuppressTokensAtBeginLogitsProcessor``, its mask built once and only
    where it is read: at the first generated token (``begin_index``, which Whisper moves)."""

    def __init__(self, original: SuppressTokensAtBeginLogitsProcessor) -> None:
        self.begin_suppress_tokens = original.begin_suppress_tokens
        self.begin_index = original.begin_index
        self._mask = _MaskCache(self.begin_suppress_tokens)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] != self.begin_index:
            return scores
        return torch.where(self._mask(scores), -float("inf"), scores)


def with_masks_built_once(retrieve_logit_processors: Callable[..., Any]) -> Callable[..., Any]:
    """Whisper's bound ``_retrieve_logit_processors``, its suppression processors swapped for the
    ones above in place (the order of processors decides the scores the next ones see)."""

    def retrieve(*args: Any, **kwargs: Any) -> Any:
        processors = retrieve_logit_processors(*args, **kwargs)
        if processors is None:
            return None
        return type(processors)(_built_once(processor) for processor in processors)

    return retrieve


def _built_once(processor: Any) -> Any:
    if type(processor) is SuppressTokensLogitsProcessor:
        return SuppressTokensOnce(processor)
    if type(processor) is SuppressTokensAtBeginLogitsProcessor:
        return SuppressTokensAtBeginOnce(processor)
    return processor
