"""Whisper recognition on tiny random models: assisted decoding must equal greedy decoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import WhisperForConditionalGeneration

from speaker_transcripts.config import InferenceConfig, ModelSettings
from speaker_transcripts.pipeline.asr import DraftWhisper, SpeechRecognizer
from speaker_transcripts.pipeline.audio import decode_file


@pytest.fixture(scope="module")
def recognizers(tiny_models):
    def build(assistant: str | None, main: str = "whisper") -> SpeechRecognizer:
        assistant_path = str(tiny_models[assistant]) if assistant else None
        # float32: token-identical assisted decoding is a property of plain precision. The CPU fast
        # path quantises activations per call, so verifying k drafted tokens at once can round
        # differently from k single steps (test_cpu_fast_path.py covers assisted runs there).
        settings = ModelSettings(asr_model=str(tiny_models[main]), assistant_model=assistant_path, dtype="float32")
        return SpeechRecognizer(settings)

    return {"seq2seq": build("assistant"), "causal": build("assistant_causal"), "english": build(None, "whisper_en")}


@pytest.fixture(scope="module")
def speech(speech_wav):
    return decode_file(speech_wav)


def random_features(recognizer: SpeechRecognizer, seed: int) -> torch.Tensor:
    samples = (np.random.default_rng(seed).normal(size=16000 * 5) * 0.1).astype(np.float32)
    return recognizer.processor.feature_extractor(samples, sampling_rate=16000, return_tensors="pt").input_features


def test_assistant_classes(recognizers):
    assert isinstance(recognizers["seq2seq"].assistant, DraftWhisper)
    assert type(recognizers["causal"].assistant).__name__ == "WhisperForCausalLM"


@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
@pytest.mark.parametrize("timestamps", [False, True])
def test_assisted_generate_is_token_identical_to_greedy(recognizers, kind, timestamps):
    recognizer = recognizers[kind]
    for seed in range(6):
        features = random_features(recognizer, seed)
        options = {"return_timestamps": timestamps, "num_beams": 1, "do_sample": False, "language": "en", "task": "transcribe"}
        greedy = recognizer.model.generate(features, **options)
        assisted = recognizer.model.generate(features, assistant_model=recognizer.assistant, **options)
        assert greedy.tolist() == assisted.tolist(), f"seed {seed}"


def test_plain_seq2seq_assistant_still_breaks_timestamps_upstream(recognizers, tiny_models):
    """Canary: the reason DraftWhisper exists. If this starts failing, transformers fixed it
    and DraftWhisper can go."""
    recognizer = recognizers["seq2seq"]
    plain = WhisperForConditionalGeneration.from_pretrained(tiny_models["assistant"]).eval()
    options = {"return_timestamps": True, "num_beams": 1, "do_sample": False, "language": "en", "task": "transcribe"}
    differs = [
        recognizer.model.generate(f, **options).tolist() != recognizer.model.generate(f, assistant_model=plain, **options).tolist()
        for f in (random_features(recognizer, seed) for seed in range(6))
    ]
    assert any(differs)


@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
@pytest.mark.parametrize("timestamps", ["segment", "word"])
def test_assisted_transcript_equals_greedy_through_the_pipeline(recognizers, speech, kind, timestamps):
    recognizer = recognizers[kind]
    greedy = recognizer.transcribe(speech.samples, InferenceConfig(batch_size=1, return_timestamps=timestamps, language="en"), speech.duration)
    assisted = recognizer.transcribe(
        speech.samples, InferenceConfig(assisted=True, batch_size=1, return_timestamps=timestamps, language="en"), speech.duration
    )
    assert assisted.text == greedy.text and assisted.language == greedy.language
    assert [chunk.text for chunk in assisted.chunks] == [chunk.text for chunk in greedy.chunks]
    if timestamps == "segment":  # timestamp tokens: exactly the same
        assert assisted.chunks == greedy.chunks
    else:  # word times come from cross-attention alignment, computed over differently sized steps
        for a, g in zip(assisted.chunks, greedy.chunks, strict=True):
            assert a.start == pytest.approx(g.start, abs=0.1) and a.end == pytest.approx(g.end, abs=0.1)


def test_timestamps_are_closed_and_inside_the_audio(recognizers, speech):
    transcript = recognizers["seq2seq"].transcribe(speech.samples, InferenceConfig(), speech.duration)
    assert transcript.chunks
    for chunk in transcript.chunks:
        assert 0.0 <= chunk.start <= chunk.end <= round(speech.duration, 2) + 0.01


def test_word_timestamps_leave_sdpa_attention_in_place(recognizers, speech):
    """transformers switches to eager attention for word timestamps; only the decoder's cross-
    attention needs it (its weights time the words): the encoder stays on SDPA, and all of it after."""
    recognizer = recognizers["seq2seq"]
    seen = {}

    def record(name):
        def hook(module, _args):
            seen.setdefault(name, set()).add(module.config._attn_implementation)

        return hook

    encoder_attention = recognizer.model.get_encoder().layers[0].self_attn
    cross_attention = recognizer.model.get_decoder().layers[0].encoder_attn
    handles = [encoder_attention.register_forward_pre_hook(record("encoder")),
               cross_attention.register_forward_pre_hook(record("cross"))]
    try:
        recognizer.transcribe(speech.samples, InferenceConfig(return_timestamps="word", language="en"), speech.duration)
    finally:
        for handle in handles:
            handle.remove()
    assert seen == {"encoder": {"sdpa"}, "cross": {"eager"}}
    assert recognizer.model.config._attn_implementation == "sdpa"


def test_on_the_cpu_the_decoding_loop_runs_on_one_thread_and_its_large_products_on_all(recognizers, speech):
    """A decoder step is many small products, faster on one thread; the encoder, the cross-attention and
    the vocabulary projection share out over every thread Whisper was loaded with, and the loop goes back
    to one after each. Also on a thread that first uses torch while a one-thread stage runs elsewhere, and
    so starts on one thread (cpu_threads.py): the large products must not then run on one core."""
    import threading

    recognizer = recognizers["english"]
    if recognizer.threads < 2:
        pytest.skip("one CPU thread: nothing to choose")
    assert recognizer.loop_threads == 1
    decoder = recognizer.model.get_decoder()
    parts = {
        "encoder": recognizer.model.get_encoder(),
        "decoder": decoder,
        "cross-attention": decoder.layers[0].encoder_attn,
        "self-attention after it": decoder.layers[-1].self_attn,
        "projection": recognizer.model.get_output_embeddings(),
    }
    seen: dict[str, set[int]] = {name: set() for name in [*parts, "after the projection"]}

    def record(name: str):
        return lambda *_: seen[name].add(torch.get_num_threads())

    handles = [part.register_forward_pre_hook(record(name)) for name, part in parts.items()]
    handles.append(recognizer.model.register_forward_hook(record("after the projection")))
    loaded_with = recognizer.threads
    try:
        torch.set_num_threads(1)  # the count a fresh thread inherits now
        thread = threading.Thread(target=recognizer.transcribe, args=(speech.samples, InferenceConfig(), speech.duration))
        thread.start()
        thread.join()
    finally:
        torch.set_num_threads(loaded_with)
        for handle in handles:
            handle.remove()
    assert seen["encoder"] == seen["cross-attention"] == seen["projection"] == {loaded_with}
    assert seen["decoder"] == seen["self-attention after it"] == seen["after the projection"] == {1}


def test_word_timestamps_keep_only_the_alignment_heads_and_time_words_the_same(recognizers, speech, monkeypatch):
    """Only the alignment heads' cross-attention, and no per-token scores, are kept while words are
    timed; the words and their times equal those computed from everything transformers keeps."""
    from contextlib import contextmanager

    recognizer = recognizers["seq2seq"]
    config = InferenceConfig(return_timestamps="word", language="en")
    model = recognizer.model
    kept_heads, kept_scores = [], []
    extract = model._extract_token_timestamps

    def recording(generate_outputs, alignment_heads, **kwargs):
        kept_heads.append(sum(layer.shape[1] for layer in generate_outputs.cross_attentions[0]))
        kept_scores.append(generate_outputs.get("scores") is not None)
        return extract(generate_outputs, alignment_heads, **kwargs)

    monkeypatch.setattr(model, "_extract_token_timestamps", recording)
    slim = recognizer.transcribe(speech.samples, config, speech.duration).chunks

    @contextmanager
    def every_head(_self, _word_timestamps):
        yield

    monkeypatch.setattr(type(recognizer), "_word_timing_slimmed", every_head)
    full = recognizer.transcribe(speech.samples, config, speech.duration).chunks
    layers, heads = model.config.decoder_layers, model.config.decoder_attention_heads
    alignment = model.generation_config.alignment_heads
    assert len(alignment) < layers * heads  # otherwise nothing is left out
    assert kept_heads == [len(alignment) + layers - len({layer for layer, _ in alignment}), layers * heads]
    assert kept_scores == [False, True]
    assert slim == full and len(full) > 1


def test_language_detected_once_when_not_given(recognizers, speech):
    recognizer = recognizers["seq2seq"]
    transcript = recognizer.transcribe(speech.samples, InferenceConfig(), speech.duration)
    assert transcript.language in recognizer.capabilities.language_codes


def test_english_only_model(recognizers, speech):
    recognizer = recognizers["english"]
    assert not recognizer.capabilities.multilingual
    assert recognizer.transcribe(speech.samples, InferenceConfig(), speech.duration).language == "en"


def test_capabilities_come_from_the_checkpoint(recognizers):
    capabilities = recognizers["seq2seq"].capabilities
    assert capabilities.multilingual and capabilities.has_assistant
    assert capabilities.language_codes == {"en", "de", "fr", "es"}
    assert capabilities.language_aliases["german"] == "de"


def test_assistant_with_another_vocabulary_fails_at_start(tiny_models):
    with pytest.raises(ValueError, match="vocabulary"):
        SpeechRecognizer(ModelSettings(asr_model=str(tiny_models["whisper"]), assistant_model=str(tiny_models["whisper_en"])))


@pytest.mark.parametrize(("chunk_length_s", "budget"), [(1.0, 31), (30.0, None)])
def test_short_windows_get_whispers_token_budget_scaled_down(recognizers, speech, monkeypatch, chunk_length_s, budget):
    """A looping decode of a 1-s window stops after 31 tokens, not Whisper's 448."""
    recognizer = recognizers["english"]
    original, budgets = recognizer.model.generate, []

    def generate(*args, **kwargs):
        budgets.append(kwargs.get("max_new_tokens"))
        return original(*args, **kwargs)

    monkeypatch.setattr(recognizer.model, "generate", generate)
    recognizer.transcribe(speech.samples, InferenceConfig(chunk_length_s=chunk_length_s), speech.duration)
    assert budgets and set(budgets) == {budget}


def test_a_checkpoint_with_old_settings_runs_without_library_notices(tiny_models, speech_wav, tmp_path):
    """OpenAI's Hub checkpoints carry ``forced_decoder_ids`` and ``clean_up_tokenization_spaces``,
    and transformers draws a "Loading weights" bar per model: with ASR_MODEL naming such a folder,
    a CLI run prints the transcript, and on stderr only the line saying what was loaded."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    checkpoint = shutil.copytree(tiny_models["whisper"], tmp_path / "old-style-whisper")
    generation = json.loads((checkpoint / "generation_config.json").read_text())
    generation["forced_decoder_ids"] = [[1, None], [2, generation["task_to_id"]["transcribe"]]]
    (checkpoint / "generation_config.json").write_text(json.dumps(generation))
    tokenizer = json.loads((checkpoint / "tokenizer_config.json").read_text())
    (checkpoint / "tokenizer_config.json").write_text(json.dumps({**tokenizer, "clean_up_tokenization_spaces": True}))
    audio = tmp_path / "speech.wav"
    audio.write_bytes(speech_wav)
    root = Path(__file__).resolve().parents[2]
    completed = subprocess.run(
        [sys.executable, "-m", "speaker_transcripts", "transcribe", str(audio), "--no-diarize", "--format", "txt"],
        cwd=root, env={**os.environ, "ASR_MODEL": str(checkpoint)}, capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = [line for line in completed.stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{checkpoint}: speech recognition on cpu ("), lines
    assert "loaded in" in lines[0]


def test_a_piece_that_repeats_itself_is_decoded_again_as_transformers_would(recognizers, speech, monkeypatch):
    """The loop guard: a piece whose one-pass text fails ``repetition.looping`` is decoded again with
    end-of-text allowed (the plain pipeline call), and its chunks replace the looping ones, in order,
    also for the pieces handed on as they are decoded."""
    from speaker_transcripts.pipeline import asr
    from speaker_transcripts.pipeline.long_form import Piece

    recognizer = recognizers["english"]
    samples = np.concatenate([speech.samples, np.zeros(8000, dtype=np.float32), speech.samples])
    half = len(speech.samples) + 4000
    pieces = [Piece(spans=((0, half),)), Piece(spans=((half, len(samples)),))]
    config = InferenceConfig(language="en", batch_size=2)
    verdicts: list[str | None] = []
    monkeypatch.setattr(asr, "looping", lambda text: verdicts.pop(0) if verdicts else None)
    one_pass = recognizer.transcribe(samples, config, len(samples) / 16000, pieces=pieces, on_segment=lambda _: None)

    again: list[dict] = []
    decoded_again = asr.SpeechRecognizer._decoded_again

    def spy(self, samples_, piece, duration, options, reason, fallback_temperatures):
        chunks = decoded_again(self, samples_, piece, duration, options, reason, fallback_temperatures)
        again.append({"piece": piece, "reason": reason, "generate_kwargs": options["generate_kwargs"], "chunks": chunks})
        return chunks

    monkeypatch.setattr(asr.SpeechRecognizer, "_decoded_again", spy)
    verdicts.extend(["a test loop", None])  # the first piece loops, the second does not
    handed_on = []
    guarded = recognizer.transcribe(samples, config, len(samples) / 16000, pieces=pieces, on_segment=handed_on.append)
    assert [call["piece"] for call in again] == [pieces[0]] and again[0]["reason"] == "a test loop"
    assert "logits_processor" not in again[0]["generate_kwargs"]  # end-of-text allowed: no FinishEachPiece
    assert handed_on == guarded.chunks  # in order: the second piece waited for the first
    first = again[0]["chunks"]
    second = guarded.chunks[len(first):]
    assert guarded.chunks[: len(first)] == first and second == one_pass.chunks[len(one_pass.chunks) - len(second):]


def sampling_temperatures(recognizer, monkeypatch) -> list:
    """The temperature of each pipeline call the recognizer makes from now on (None: greedy)."""
    calls = []
    pipeline = recognizer.pipeline

    def counting(*args, **kwargs):
        calls.append(kwargs["generate_kwargs"].get("temperature"))
        return pipeline(*args, **kwargs)

    monkeypatch.setattr(recognizer, "pipeline", counting)
    return calls


def test_a_loop_that_persists_falls_back_to_sampling_and_keeps_the_least_repetitive_text(recognizers, speech, monkeypatch):
    from speaker_transcripts.pipeline import asr
    from speaker_transcripts.pipeline.long_form import Piece

    recognizer = recognizers["english"]
    ratios = iter([3.0, 2.9, 2.0, 9.9])  # greedy, 0.2, 0.4 (kept: under the limit), never 0.6
    monkeypatch.setattr(asr, "compression_ratio", lambda text: next(ratios))
    calls = sampling_temperatures(recognizer, monkeypatch)
    piece = Piece(spans=((0, len(speech.samples)),))
    options, _ = recognizer._decoding_options(speech.samples, InferenceConfig(language="en"), [piece])
    recognizer._decoded_again(speech.samples, piece, speech.duration, options, "a test loop", asr.FALLBACK_TEMPERATURES)
    assert calls == [None, 0.2, 0.4]


@pytest.mark.parametrize(("fallback", "decodes"), [(None, [None, None, 0.2, 0.4, 0.6]), ((), [None, None])])
def test_a_decode_may_forgo_the_sampled_fallback_of_a_loop(recognizers, speech, monkeypatch, fallback, decodes):
    """A piece that loops in one pass and again when decoded anew is sampled at ``FALLBACK_TEMPERATURES``; a live
    session's final decode (``fallback_temperatures=()``) stops at the one decode again, its text as it stands."""
    from speaker_transcripts.pipeline import asr
    from speaker_transcripts.pipeline.long_form import Piece

    recognizer = recognizers["english"]
    monkeypatch.setattr(asr, "looping", lambda text: "a test loop")
    monkeypatch.setattr(asr, "compression_ratio", lambda text: 9.9)
    calls = sampling_temperatures(recognizer, monkeypatch)
    piece = [Piece(spans=((0, len(speech.samples)),))]
    decoded = recognizer.transcribe(speech.samples, InferenceConfig(language="en"), speech.duration, pieces=piece, fallback_temperatures=fallback)
    assert calls == decodes and decoded.chunks


def test_without_retries_a_looping_piece_gives_no_words_and_is_not_decoded_again(recognizers, speech, monkeypatch):
    """A live session's interim decode (``retry_loops=False``): the looping hypothesis is dropped."""
    from speaker_transcripts.pipeline import asr
    from speaker_transcripts.pipeline.long_form import Piece

    recognizer = recognizers["english"]
    monkeypatch.setattr(asr, "looping", lambda text: "a test loop")
    monkeypatch.setattr(asr.SpeechRecognizer, "_decoded_again", lambda *a, **k: pytest.fail("decoded again"))
    piece = [Piece(spans=((0, len(speech.samples)),))]
    dropped = recognizer.transcribe(speech.samples, InferenceConfig(language="en"), speech.duration, pieces=piece, retry_loops=False)
    assert dropped.chunks == [] and dropped.text == ""


@pytest.mark.parametrize("retry_loops", [True, False])
def test_only_a_decode_not_retried_ends_a_loop_early_and_keeps_its_first_copy(recognizers, speech, monkeypatch, retry_loops):
    """Without retries (a live session's interim decode) generation ends a row that loops (``EndLoops``)
    and the words keep the loop's first copy; a decode that is retried when it loops keeps transformers'
    own stopping and every word (the fallback needs to see the loop)."""
    from transformers import WhisperForConditionalGeneration

    from speaker_transcripts.pipeline import asr
    from speaker_transcripts.pipeline.long_form import Piece
    from speaker_transcripts.pipeline.loop_ending import EndLoops
    from speaker_transcripts.pipeline.transcript import Chunk

    recognizer = recognizers["english"]
    processors: list[list[type]] = []
    generate = WhisperForConditionalGeneration.generate

    def spying(self, *args, **kwargs):
        processors.append([type(processor) for processor in kwargs.get("logits_processor") or []])
        return generate(self, *args, **kwargs)

    words = [Chunk(text, 0.1 * index, 0.1 * index + 0.05) for index, text in enumerate([" Keep", " it.", " Morning.", " Morning", " morning.", " Morning."])]
    monkeypatch.setattr(WhisperForConditionalGeneration, "generate", spying)
    monkeypatch.setattr(asr, "close_timestamps", lambda chunks, duration: list(words))
    monkeypatch.setattr(asr, "looping", lambda text: None)
    piece = [Piece(spans=((0, len(speech.samples)),))]
    decoded = recognizer.transcribe(speech.samples, InferenceConfig(language="en"), speech.duration, pieces=piece, retry_loops=retry_loops)
    assert (EndLoops in processors[0]) is not retry_loops
    assert decoded.chunks == (words if retry_loops else words[:3])


def test_a_sized_window_encodes_the_piece_and_a_margin_and_times_words_inside_the_audio(recognizers, speech, monkeypatch):
    """``shortest_window_s``: the encoder reads the piece plus the margin, at least that long (never 3,000
    frames for a few seconds), the word times stay inside the audio, and the model is whole again afterwards."""
    from speaker_transcripts.models.encoder_window import SHORTEST_S, window_frames
    from speaker_transcripts.pipeline.long_form import Piece

    recognizer = recognizers["english"]
    encoder = recognizer.model.get_encoder()
    seen: list[int] = []
    handle = encoder.register_forward_pre_hook(
        lambda _module, args, kwargs: seen.append((args[0] if args else kwargs["input_features"]).shape[-1]), with_kwargs=True)
    try:
        config = InferenceConfig(language="en", return_timestamps="word")
        piece = [Piece(spans=((0, len(speech.samples)),))]
        sized = recognizer.transcribe(speech.samples, config, speech.duration, pieces=piece, shortest_window_s=SHORTEST_S)
        with_sized, seen[:] = list(seen), []
        recognizer.transcribe(speech.samples, config, speech.duration, pieces=piece, shortest_window_s=speech.duration + 8.0)
        with_longer, seen[:] = list(seen), []
        recognizer.transcribe(speech.samples, config, speech.duration, pieces=piece)
    finally:
        handle.remove()
    assert set(with_sized) == {window_frames(speech.duration, 3000)} and set(seen) == {3000}
    assert set(with_longer) == {window_frames(speech.duration, 3000, speech.duration + 8.0)} and with_sized[0] < with_longer[0] < 3000
    assert all(0 <= word.start <= word.end <= speech.duration + 0.02 for word in sized.chunks)
    assert recognizer.model.config.max_source_positions == 1500
