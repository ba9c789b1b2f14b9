"""A decode that continues given text: Whisper is handed words it has already said as the start of its
answer (SimulStreaming's forced decoding), and generates only what comes after them.

A live session decodes a turn's growing buffer every half second, and most words of each decode were
sent already: a decoder step each, about 20 ms on a 2-core CPU, for words that cannot change. Given as
``decoder_input_ids`` after Whisper's start tokens (and the prompt), they cost one forward pass together.
transformers (5.24) builds the start tokens in ``_prepare_decoder_input_ids`` and times words by dynamic
time warping over the cross-attention of the tokens after everything it was given, and its logits
processors (timestamp rules, first-token suppression, the package's loop and piece endings) read the
tokens from ``begin_index``, which it sets after everything it was given. ``forced_prefix`` appends the
words' tokens to what it builds (after an opening ``<|0.00|>`` where the decode predicts timestamps), and
has the warping and the processors start before them: the words given are timed and ruled on as if
Whisper had generated them, and it goes on from there, or ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def forced_prefix(model: Any, tokens: Sequence[int]) -> Iterator[None]:
    """While open, every ``model.generate`` starts its answer with ``tokens`` (text tokens, no special
    ones) and times them with the words it generates; nothing changes where ``tokens`` is empty."""
    if not tokens:
        yield
        return
    prepare = model._prepare_decoder_input_ids
    extract = model._extract_token_timestamps
    retrieve = model._retrieve_logit_processors
    no_timestamps = model.generation_config.no_timestamps_token_id
    added = [0]  # the tokens the last generate call was given after its own (the prefix, its timestamp)

    def prepare_with_prefix(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        ids, rest = prepare(*args, **kwargs)
        opening = [] if int(ids[0, -1]) == no_timestamps else [no_timestamps + 1]  # <|0.00|>
        prefix = torch.tensor([*opening, *tokens], dtype=ids.dtype, device=ids.device).expand(ids.shape[0], -1)
        added[0] = prefix.shape[-1]
        return torch.cat([ids, prefix], dim=-1), rest

    def extract_with_prefix(*args: Any, num_input_ids: int = 0, **kwargs: Any) -> torch.Tensor:
        return extract(*args, num_input_ids=num_input_ids - added[0], **kwargs)

    def retrieve_with_prefix(*args: Any, **kwargs: Any) -> Any:
        processors = retrieve(*args, **kwargs)
        for processor in processors or ():
            if hasattr(processor, "set_begin_index"):
                processor.set_begin_index = _before_prefix(processor.set_begin_index, added)
        return processors

    model._prepare_decoder_input_ids = prepare_with_prefix
    model._extract_token_timestamps = extract_with_prefix
    model._retrieve_logit_processors = retrieve_with_prefix
    try:
        yield
    finally:
        model._retrieve_logit_processors = retrieve
        del model._prepare_decoder_input_ids, model._extract_token_timestamps  # the class's own again


def _before_prefix(set_begin_index: Callable[[int], None], added: list[int]) -> Callable[[int], None]:
    """``set_begin_index`` moved back over the tokens ``added`` last (generate sets it after them)."""
    return lambda index: set_begin_index(index - added[0])
