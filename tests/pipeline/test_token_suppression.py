"""Token suppression with masks built once suppresses exactly what transformers' own processors do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import (
    SuppressTokensAtBeginLogitsProcessor,
    SuppressTokensLogitsProcessor,
    WhisperTimeStampLogitsProcessor,
)

from speaker_transcripts.config import ModelSettings
from speaker_transcripts.pipeline.asr import SpeechRecognizer
from speaker_transcripts.pipeline.token_suppression import (
    SuppressTokensAtBeginOnce,
    SuppressTokensOnce,
    vocabulary_mask,
    with_masks_built_once,
)

VOCABULARY = 300


def scores(rows: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, VOCABULARY, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("tokens", [[5, 17, 17, 299], [0, 300, 1000, -1], []])
def test_the_mask_marks_what_isin_marks(tokens):
    tokens_tensor = torch.tensor(tokens)  # an empty list makes a float tensor, as transformers builds it
    expected = torch.isin(torch.arange(VOCABULARY), tokens_tensor)
    assert torch.equal(vocabulary_mask(tokens_tensor, scores()), expected)


def test_suppression_gives_transformers_scores_at_every_step():
    original = SuppressTokensLogitsProcessor([3, 7, 250])
    once = SuppressTokensOnce(original)
    for step in range(4):
        input_ids = torch.zeros(3, 2 + step, dtype=torch.long)
        assert torch.equal(once(input_ids, scores(seed=step)), original(input_ids, scores(seed=step)))
    assert torch.isinf(once(input_ids, scores())[:, [3, 7, 250]]).all()


def test_suppression_at_begin_applies_at_the_begin_index_only_and_follows_it():
    original = SuppressTokensAtBeginLogitsProcessor([4, 9], begin_index=3)
    once = SuppressTokensAtBeginOnce(original)
    for begin in (3, 5):  # Whisper moves the begin index for later segments
        original.set_begin_index(begin)
        once.set_begin_index(begin)
        for length in range(2, 7):
            input_ids = torch.zeros(3, length, dtype=torch.long)
            after = once(input_ids, scores(seed=length))
            assert torch.equal(after, original(input_ids, scores(seed=length)))
            assert bool(torch.isinf(after[:, [4, 9]]).all()) == (length == begin)


def test_the_processors_are_swapped_in_place_and_the_others_kept():
    timestamps = object()  # stands for any other processor
    listed = [SuppressTokensAtBeginLogitsProcessor([1], begin_index=2), SuppressTokensLogitsProcessor([2]), timestamps]
    swapped = with_masks_built_once(lambda: list(listed))()
    assert [type(processor) for processor in swapped] == [SuppressTokensAtBeginOnce, SuppressTokensOnce, object]
    assert swapped[2] is timestamps
    assert with_masks_built_once(lambda: None)() is None


def test_whisper_decodes_the_same_tokens_with_the_masks_built_once(tiny_models):
    recognizer = SpeechRecognizer(ModelSettings(asr_model=str(tiny_models["whisper_en"]), dtype="float32"))
    model = recognizer.model
    samples = (np.random.default_rng(3).normal(size=16000 * 5) * 0.1).astype(np.float32)
    features = recognizer.processor.feature_extractor(samples, sampling_rate=16000, return_tensors="pt").input_features
    options = {"return_timestamps": True, "num_beams": 1, "do_sample": False, "max_new_tokens": 20}
    free = model.generate(features, suppress_tokens=None, **options)
    text_tokens = [token for token in free[0].tolist() if token < model.generation_config.eos_token_id]
    assert text_tokens, "the tiny model writes some text to suppress"
    suppressed = sorted(set(text_tokens))[:3]
    built_once, retrieved = model._retrieve_logit_processors, []

    def spied(*args, **kwargs):
        retrieved.append(built_once(*args, **kwargs))
        return retrieved[-1]

    model._retrieve_logit_processors = spied
    try:
        once = model.generate(features, suppress_tokens=suppressed, **options)
    finally:
        del model._retrieve_logit_processors  # the class's own, masks built at every step
    own = model.generate(features, suppress_tokens=suppressed, **options)
    assert {type(processor) for processor in retrieved[-1]} >= {SuppressTokensOnce, WhisperTimeStampLogitsProcessor}
    assert once.tolist() == own.tolist()
    assert not set(once[0].tolist()) & set(suppressed) and once.tolist() != free.tolist()
