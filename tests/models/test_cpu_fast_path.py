"""The CPU fast path on tiny random Whisper models: what it converts, that the rest of the
pipeline sees float32 as before, and that it is what DTYPE=auto gives on CPU (not float32)."""

from __future__ import annotations

import gc
import warnings
import weakref

import pytest
import torch
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear
from transformers import WhisperForCausalLM, WhisperForConditionalGeneration

from speaker_transcripts.config import InferenceConfig, ModelSettings
from speaker_transcripts.models.cpu_fast_path import (
    BFLOAT16,
    ENCODER_ROWS,
    INT8_DECODER,
    PACKED_PROJECTION,
    Float16Embedding,
    Int8Linear,
    PackedProjection,
    bfloat16_supported,
    speed_up_for_cpu,
)
from speaker_transcripts.pipeline.asr import SpeechRecognizer
from speaker_transcripts.pipeline.audio import decode_file


@pytest.fixture
def whisper(tiny_models) -> WhisperForConditionalGeneration:
    return WhisperForConditionalGeneration.from_pretrained(tiny_models["whisper"], attn_implementation="sdpa").eval()


def features(model: WhisperForConditionalGeneration) -> torch.Tensor:
    return torch.randn(1, model.config.num_mel_bins, 2 * model.config.max_source_positions, generator=torch.Generator().manual_seed(0))


needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
needs_bfloat16 = pytest.mark.skipif(not bfloat16_supported(), reason="this CPU has no bfloat16 instructions (the fast path keeps float32)")


@needs_bfloat16
def test_with_bfloat16_the_encoder_and_projection_are_bfloat16_and_the_decoder_layers_int8(whisper):
    reference_encoder = whisper.get_encoder()(features(whisper)).last_hidden_state
    embedding = whisper.get_input_embeddings().weight.detach().clone()
    hidden_states = torch.randn(3, 2, whisper.config.d_model, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        bfloat16_logits = torch.nn.functional.linear(hidden_states.bfloat16(), whisper.proj_out.weight.bfloat16()).float()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = speed_up_for_cpu(whisper, bfloat16=True)
    assert done == [INT8_DECODER, BFLOAT16]
    assert caught == [], "the deprecation notices of torch.ao are silenced where it is called on purpose"
    assert isinstance(whisper.proj_out, PackedProjection) and whisper.proj_out.dtype == torch.bfloat16
    layers = [module for name, module in whisper.model.decoder.named_modules() if name]
    assert not any(isinstance(module, torch.nn.Linear) for module in layers), "every decoder layer's linear map is int8"
    assert any(isinstance(module, DynamicQuantizedLinear) for module in layers)
    assert {parameter.dtype for parameter in whisper.get_encoder().parameters()} == {torch.bfloat16}
    assert torch.equal(whisper.get_input_embeddings().weight, embedding), "random float32 weights: the table stays float32, untied"
    with torch.inference_mode():
        hidden = whisper.get_encoder()(features(whisper)).last_hidden_state
        logits = whisper.proj_out(hidden[:, :3])
        packed_logits = whisper.proj_out(hidden_states)
    assert hidden.dtype == torch.float32 and torch.allclose(hidden, reference_encoder, atol=0.1)
    assert logits.dtype == torch.float32
    assert torch.allclose(packed_logits, bfloat16_logits, rtol=1e-3, atol=1e-3), "bfloat16 arithmetic, only the kernel differs"


def test_the_int8_layers_compute_what_torchs_own_dynamic_int8_layer_does(whisper):
    hidden = torch.randn(2, 1, whisper.config.d_model, generator=torch.Generator().manual_seed(2))
    speed_up_for_cpu(whisper, bfloat16=False)
    layers = [module for module in whisper.model.decoder.modules() if isinstance(module, DynamicQuantizedLinear)]
    assert layers and all(type(layer) is Int8Linear for layer in layers)
    fc1 = whisper.model.decoder.layers[0].fc1
    torchs_own = DynamicQuantizedLinear(fc1.in_features, fc1.out_features)
    torchs_own.set_weight_bias(*fc1._packed_params._weight_bias())
    with torch.inference_mode():
        assert torch.equal(fc1(hidden), torchs_own(hidden)), "the same operator and arguments as torch's forward"
        assert not torch.equal(fc1(hidden), torchs_own(hidden + 1))


def test_the_float32_layers_int8_replaces_are_freed_at_once_not_at_the_next_full_collection(whisper):
    replaced = weakref.ref(whisper.model.decoder.layers[0].fc1)
    collecting = gc.isenabled()
    gc.disable()  # only what the fast path collects itself counts
    try:
        speed_up_for_cpu(whisper, bfloat16=False)
        assert replaced() is None, "quantize_dynamic leaves the float32 layers it replaced in reference cycles"
    finally:
        if collecting:
            gc.enable()


def test_the_encoder_takes_a_batch_a_few_windows_at_a_time_with_the_same_output(whisper):
    """A batch of 24 windows in one encoder call peaked 0.2-0.35 GB higher than 4 at a time, and took
    longer (cpu_fast_path._encode_in_slices); the decoder still gets the whole batch's states."""
    batch = torch.randn(2 * ENCODER_ROWS + 1, whisper.config.num_mel_bins, 2 * whisper.config.max_source_positions,
                        generator=torch.Generator().manual_seed(3))
    encoder = whisper.get_encoder()
    with torch.inference_mode():
        expected = encoder(batch).last_hidden_state
    speed_up_for_cpu(whisper, bfloat16=False)
    rows: list[int] = []
    encoder.conv1.register_forward_pre_hook(lambda _module, args: rows.append(args[0].shape[0]))
    with torch.inference_mode():
        sliced = encoder(batch)
        as_tuple = encoder(batch, return_dict=False)
        with_states = encoder(batch, output_hidden_states=True)
    assert rows == [ENCODER_ROWS, ENCODER_ROWS, 1] * 2 + [len(batch)], "whole only when its hidden states are asked for"
    assert torch.allclose(sliced.last_hidden_state, expected, atol=1e-5) and torch.allclose(as_tuple[0], expected, atol=1e-5)
    assert len(with_states.hidden_states) == whisper.config.encoder_layers + 1


@needs_onednn
def test_without_bfloat16_the_encoder_and_the_projection_stay_float32(whisper):
    """An int8 projection cost 5 WER points on an AVX2-only CPU; the decoder layers alone are int8,
    and the float32 projection runs through oneDNN with its weight packed: the same logits."""
    projection = whisper.proj_out
    embedding = whisper.get_input_embeddings().weight
    hidden = torch.randn(3, 2, whisper.config.d_model, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = projection(hidden)
    assert speed_up_for_cpu(whisper, bfloat16=False) == [INT8_DECODER, PACKED_PROJECTION]
    assert {parameter.dtype for parameter in whisper.get_encoder().parameters()} == {torch.float32}
    assert isinstance(whisper.proj_out, PackedProjection)
    with torch.inference_mode():
        logits = whisper.proj_out(hidden)
    assert logits.dtype == torch.float32 and logits.shape == expected.shape
    assert torch.allclose(logits, expected, rtol=1e-4, atol=1e-4), "float32 arithmetic, only the kernel differs"
    assert whisper.get_input_embeddings().weight is embedding, "random float32 weights: the table is left as it was"
    layers = [module for name, module in whisper.model.decoder.named_modules() if name]
    assert not any(isinstance(module, torch.nn.Linear) for module in layers), "every decoder layer's linear map is int8"


@needs_onednn
@pytest.mark.parametrize("bfloat16", [False, pytest.param(True, marks=needs_bfloat16)])
def test_a_table_of_float16_values_is_held_in_float16_and_looks_up_the_same_float32_rows(whisper, bfloat16):
    """The embedded models are stored in float16: once the projection is an untied copy, their token
    embedding is only looked up, and half the table gives the very rows the float32 one did."""
    table = whisper.get_input_embeddings().weight
    with torch.no_grad():
        table.copy_(table.half().float())
    tokens = torch.tensor([[0, 5, whisper.config.vocab_size - 1], [7, 7, 1]])
    with torch.inference_mode():
        expected = whisper.get_input_embeddings()(tokens)
        hidden = torch.randn(2, 3, whisper.config.d_model, generator=torch.Generator().manual_seed(4))
        expected_logits = whisper.proj_out(hidden)
    speed_up_for_cpu(whisper, bfloat16=bfloat16)
    embedding = whisper.get_input_embeddings()
    assert isinstance(embedding, Float16Embedding) and embedding.weight.dtype == torch.float16
    assert whisper.model.decoder.embed_tokens is embedding, "the decoder looks its tokens up in the float16 table"
    with torch.inference_mode():
        rows = embedding(tokens)
        logits = whisper.proj_out(hidden)
    assert rows.dtype == torch.float32 and torch.equal(rows, expected)
    tolerance = 1e-2 if bfloat16 else 1e-4
    assert torch.allclose(logits, expected_logits, rtol=tolerance, atol=tolerance), "the projection kept its own copy"


def test_a_table_is_left_whole_where_the_projection_still_shares_it(whisper, monkeypatch):
    """Without oneDNN the projection stays the float32 linear tied to the table: a float16 copy would
    only add to it."""
    table = whisper.get_input_embeddings().weight
    with torch.no_grad():
        table.copy_(table.half().float())
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert speed_up_for_cpu(whisper, bfloat16=False) == [INT8_DECODER]
    assert whisper.get_input_embeddings().weight is table and whisper.proj_out.weight is table


@needs_onednn
def test_a_decoder_only_assistant_is_quantised_but_for_its_projection(tiny_models):
    assistant = WhisperForCausalLM.from_pretrained(tiny_models["assistant_causal"]).eval()
    assert speed_up_for_cpu(assistant, bfloat16=False) == [INT8_DECODER, PACKED_PROJECTION]
    assert not [module for module in assistant.modules() if isinstance(module, torch.nn.Linear)]
    assert isinstance(assistant.proj_out, PackedProjection)


@pytest.mark.parametrize(("dtype", "precision"), [("auto", INT8_DECODER), ("float32", "float32")])
def test_dtype_auto_on_cpu_takes_the_fast_path_and_float32_keeps_the_plain_model(tiny_models, dtype, precision, speech_wav):
    recognizer = SpeechRecognizer(ModelSettings(asr_model=str(tiny_models["whisper"]), dtype=dtype, device="cpu"))
    assert recognizer.precision.startswith(precision)
    assert (BFLOAT16 in recognizer.precision) == (dtype == "auto" and bfloat16_supported())
    # the live defaults for a fast machine (live.capacity) apply where the encoder computes in native bfloat16
    assert recognizer.capabilities.fast_encoder == (BFLOAT16 in recognizer.precision)
    speech = decode_file(speech_wav)
    transcript = recognizer.transcribe(speech.samples, InferenceConfig(return_timestamps="word"), speech.duration)
    assert transcript.chunks and all(0.0 <= chunk.start <= chunk.end for chunk in transcript.chunks)


@pytest.mark.parametrize("native_bfloat16", [True, False])
def test_the_encoder_counts_as_fast_where_it_computes_in_native_bfloat16(tiny_models, monkeypatch, native_bfloat16):
    """``fast_encoder`` (the live defaults of live.capacity) follows the CPU's bfloat16, whatever this machine has
    (a bfloat16 encoder is fast only where the CPU computes it natively); float32 on the CPU is never fast."""
    from speaker_transcripts.pipeline import asr

    monkeypatch.setattr(asr, "bfloat16_supported", lambda: native_bfloat16)
    in_bfloat16 = SpeechRecognizer(ModelSettings(asr_model=str(tiny_models["whisper"]), dtype="bfloat16", device="cpu"))
    in_float32 = SpeechRecognizer(ModelSettings(asr_model=str(tiny_models["whisper"]), dtype="float32", device="cpu"))
    assert in_bfloat16.capabilities.fast_encoder is native_bfloat16
    assert in_float32.capabilities.fast_encoder is False


def test_assisted_decoding_runs_on_the_fast_path_with_both_models_sped_up(tiny_models, speech_wav):
    settings = ModelSettings(asr_model=str(tiny_models["whisper"]), assistant_model=str(tiny_models["assistant"]), device="cpu")
    recognizer = SpeechRecognizer(settings)
    assert any(isinstance(module, DynamicQuantizedLinear) for module in recognizer.assistant.modules())
    assert isinstance(recognizer.assistant.proj_out, PackedProjection if torch.backends.mkldnn.is_available() else torch.nn.Linear)
    speech = decode_file(speech_wav)
    config = InferenceConfig(assisted=True, batch_size=1, language="en")
    assisted = recognizer.transcribe(speech.samples, config, speech.duration)
    assert assisted.chunks and all(0.0 <= chunk.start <= chunk.end <= speech.duration + 0.01 for chunk in assisted.chunks)
