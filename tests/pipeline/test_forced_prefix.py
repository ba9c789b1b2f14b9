"""A decode handed the start of its own answer gives the same answer, timed the same (tiny random Whisper)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from speaker_transcripts.config import InferenceConfig, ModelSettings
from speaker_transcripts.pipeline.asr import SpeechRecognizer
from speaker_transcripts.pipeline.audio import as_float32, decode_file
from speaker_transcripts.pipeline.forced_prefix import forced_prefix
from speaker_transcripts.pipeline.long_form import Piece


@pytest.fixture(scope="module", params=["whisper", "whisper_en"])
def recognizer(request, tiny_models) -> SpeechRecognizer:
    return SpeechRecognizer(ModelSettings(asr_model=str(tiny_models[request.param]), dtype="float32"))


@pytest.fixture(scope="module")
def samples(speech_wav) -> np.ndarray:
    return as_float32(decode_file(speech_wav).samples)


def generate(recognizer: SpeechRecognizer, samples: np.ndarray) -> list[int]:
    """Greedy tokens with timestamps (the mode word timing decodes in), the answer opening at ``<|0.00|>``."""
    features = recognizer.processor.feature_extractor(samples, sampling_rate=16000, return_tensors="pt").input_features
    language = {"language": "en", "task": "transcribe"} if recognizer.capabilities.multilingual else {}
    return recognizer.model.generate(features, return_timestamps=True, max_initial_timestamp_index=0, **language)[0].tolist()


def test_generate_goes_on_from_the_prefix_as_it_would_have(recognizer, samples):
    """The prefix is ruled on as if generated (the timestamp rules, first-token suppression, loop endings):
    greedy decoding given the first tokens of its own answer writes the same tokens after them (``generate``
    returns what it wrote after what it was given)."""
    opening = recognizer.model.generation_config.no_timestamps_token_id + 1
    whole = generate(recognizer, samples)
    if opening in whole[1:]:  # the random model reaches <|29.98|> and transformers decodes a second window
        whole = whole[: whole.index(opening, 1)]
    assert whole[0] == opening and len(whole) > 6
    for count in range(1, 6):
        with forced_prefix(recognizer.model, whole[1 : 1 + count]):
            assert (whole[: 1 + count] + generate(recognizer, samples))[: len(whole)] == whole, count


def test_a_prefix_changes_nothing_where_it_is_empty(recognizer, samples):
    whole = generate(recognizer, samples)
    with forced_prefix(recognizer.model, []):
        assert generate(recognizer, samples) == whole


def test_the_words_given_come_back_timed_on_the_audio(recognizer, samples):
    """Through ``transcribe`` with word timestamps: the words given come back, followed by what the model
    wrote after them, every word timed on the audio (transformers leaves the tokens it was given at 0 s). (The
    tiny English model's start tokens hold a text token, which the pipeline writes as a word before them.)"""
    config = InferenceConfig(language="en" if recognizer.capabilities.multilingual else None, return_timestamps="word",
                             batch_size=1, assisted=False, chunk_length_s=3)
    words = recognizer.transcribe(samples, config, len(samples) / 16000, pieces=[Piece(spans=((0, len(samples)),))],
                                  shortest_window_s=6, retry_loops=False, prefix=" go forward ten").chunks
    texts = [word.text for word in words]
    given = texts.index(" go")
    assert given <= 1 and texts[given : given + 3] == [" go", " forward", " ten"] and len(texts) > given + 3
    assert 0 < words[given + 2].end <= len(samples) / 16000 + 0.02
    assert all(earlier.start <= later.start for earlier, later in pairwise(words))
