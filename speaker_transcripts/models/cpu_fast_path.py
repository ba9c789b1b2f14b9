"""The CPU fast path, taken when ``DTYPE=auto`` (the default) runs on CPU: Whisper's decoder
layers in int8 and, where the CPU has bfloat16 instructions, the encoder and the vocabulary
projection in bfloat16 (without them, both stay float32); the projection runs through oneDNN with
its weight packed once either way, and the token embedding, once untied from it, is held in float16.
CUDA keeps float16 and SDPA.

Why: the decoder runs once per token and is bound by weight bandwidth, which int8 cuts by four; the
encoder runs once per 30-s window and is compute-bound, which bfloat16 halves where the CPU computes it
natively. The projection is never int8 (it cost words, most of all on AVX2), and the encoder is never
quantised. int8 scales activations per call, so a piece's words can depend, rarely, on its batch; both
paths are deterministic, and ``DTYPE=float32`` keeps the plain reference model. The measurements behind
each choice: docs/design.md, "The CPU fast path: why this split". Inputs and outputs of the bfloat16
parts stay float32, so feature extraction, generation and word alignment are unchanged.
``quantize_dynamic`` is deprecated in favour of torchao but in the pinned torch; its notices are silenced.
"""

from __future__ import annotations

import gc
import warnings
from typing import Any

import torch
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from speaker_transcripts.config import InferenceConfig

INT8_DECODER = "int8 decoder"
BFLOAT16 = "bfloat16 encoder and vocabulary projection"
PACKED_PROJECTION = "oneDNN-packed vocabulary projection"
ENCODER_ROWS = 4  # windows the encoder takes at once on CPU (``_encode_in_slices``)
# The rows the packed layout is chosen for (oneDNN's hint): a request's default batch of pieces (24).
# Packed for 24, it ran 5.9 / 5.6 / 11.6 ms a step for 1 / 2 / 19 rows; packed for one row, 14 / 21 ms for 2 / 19.
PACKED_FOR_ROWS: int = InferenceConfig.model_fields["batch_size"].default


# torch's int8 linear operator as its C++ callable. Called through ``torch.ops`` (2.14), every call of an
# operator that takes a TorchBind object, as this one takes the packed weight, first searches its arguments
# in Python for tracing's fake objects. Where torch has no such attribute, the public operator is used.
_INT8_LINEAR = getattr(torch.ops.quantized.linear_dynamic, "_op", torch.ops.quantized.linear_dynamic)


def bfloat16_supported() -> bool:
    """Whether this CPU computes in bfloat16 natively (oneDNN's check: AVX-512 BF16 or AMX)."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return bool(check()) if check is not None else False
    except RuntimeError:
        return False


def speed_up_for_cpu(model: nn.Module, bfloat16: bool | None = None) -> list[str]:
    """Make ``model`` (a Whisper, or a decoder-only assistant) fast on CPU, in place: bfloat16
    where ``bfloat16`` (default: the CPU supports it) allows, int8 for the decoder's other linear
    layers. Returns what was done, for the start-up log."""
    use_bfloat16 = bfloat16_supported() if bfloat16 is None else bfloat16
    done = []
    encoder = encoder_of(model)
    if encoder is not None:
        _encode_in_slices(encoder)
    if use_bfloat16:
        if encoder is not None:
            encoder.to(torch.bfloat16)
            encoder.register_forward_pre_hook(_features_to_bfloat16, with_kwargs=True)
            encoder.register_forward_hook(_hidden_states_to_float32)
        model.set_output_embeddings(PackedProjection(model.get_output_embeddings(), torch.bfloat16))
        done.append(BFLOAT16)
    elif torch.backends.mkldnn.is_available():
        model.set_output_embeddings(PackedProjection(model.get_output_embeddings()))
        done.append(PACKED_PROJECTION)
    if isinstance(model.get_output_embeddings(), PackedProjection):
        _embedding_in_float16(model)
    if _quantize_decoder(model):
        done.insert(0, INT8_DECODER)
    return done


class PackedProjection(nn.Module):
    """The vocabulary projection through oneDNN, its weight packed once, in float32 or bfloat16
    behind float32 edges: an untied copy, so the token embedding it shares its weights with stays
    as it is. Packing pays in both: float32 (see the module doc), and bfloat16, where torch's
    ``linear`` took 5.9 / 7.2 / 8.8 ms a step for 2 / 14 / 24 rows of whisper-base's projection on
    an AMD EPYC with AVX-512 BF16 against 3.4 / 4.0 / 5.0 ms packed, with the same logits (one-off
    timings of the shape, docs/performance.md)."""

    def __init__(self, projection: nn.Linear, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.dtype = dtype
        weight = projection.weight.detach().to(dtype).contiguous()
        # An opaque oneDNN tensor derived from the weight, not a parameter: kept out of the state dict.
        self.packed_weight = torch.ops.mkldnn._reorder_linear_weight(weight, PACKED_FOR_ROWS)
        self.bias = None if projection.bias is None else projection.bias.detach().to(dtype).clone()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        logits = torch.ops.mkldnn._linear_pointwise(hidden_states.to(self.dtype), self.packed_weight, self.bias, "none", [], "")
        return logits.float()


class Float16Embedding(nn.Module):
    """A token embedding looked up in a float16 table and handed on as float32: the same rows as
    the float32 table where every weight is a float16 value, in half the memory."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self.padding_idx = embedding.padding_idx
        self.weight = nn.Parameter(embedding.weight.detach().half(), requires_grad=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(input_ids, self.weight, self.padding_idx).float()


def _embedding_in_float16(model: nn.Module) -> bool:
    """Hold ``model``'s token embedding in float16 where that loses nothing (every weight a
    float16 value, as the embedded models are stored); False, and the table left as it is, otherwise."""
    embedding = model.get_input_embeddings()
    if not isinstance(embedding, nn.Embedding) or embedding.weight.dtype != torch.float32:
        return False
    weight = embedding.weight.detach()
    if not torch.equal(weight.half().float(), weight):
        return False
    model.set_input_embeddings(Float16Embedding(embedding))
    return True


class Int8Linear(DynamicQuantizedLinear):
    """torch's dynamic int8 linear layer (qint8 weight; ``reduce_range=True``, as torch's layer passes it
    since its version 4), calling its operator straight: the same arithmetic and outputs. A decoder step
    makes 48 such calls for whisper-base; torch's own ``forward`` (a dtype and version check, then the
    operator through ``torch.ops``) took 44 us a call for 2 rows and the straight call 26 (one-off timing),
    and the 1-min conversation went 3.50 -> 3.35 s (medians of 8, alternating in one process, same text)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _INT8_LINEAR(x, self._packed_params._packed_params, True)


def encoder_of(model: nn.Module | None) -> nn.Module | None:
    """The encoder of an encoder-decoder Whisper; None for a decoder-only assistant (whose
    ``get_encoder`` transformers answers with the decoder) or no model."""
    if not getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return None
    return model.get_encoder()


def _quantize_decoder(model: nn.Module) -> bool:
    """Swap every float32 linear layer of the decoder for an int8 one with a scale per output
    channel; False when there is none. The vocabulary projection is never int8: it picks each
    token out of 51,865 logits, and on a CPU without VNNI or bfloat16 (AVX2 only: AMD EPYC here)
    its int8 logits cost 5.1 WER points on the 10-min file (14.4 % against 9.4 % with it in
    float32 and the decoder layers int8) for 6 % of the time."""
    encoder = encoder_of(model)
    skipped = {id(module) for module in encoder.modules()} if encoder is not None else set()
    skipped.add(id(model.get_output_embeddings()))
    names = [
        name for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and id(module) not in skipped and module.weight.dtype == torch.float32
    ]
    if not names:
        return False
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(torch\.ao\.quantization|quantize_per_channel|quantized tensor).*")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        quantize_dynamic(model, dict.fromkeys(names, per_channel_dynamic_qconfig), mapping={nn.Linear: Int8Linear}, inplace=True)
    # quantize_dynamic leaves every float32 layer it replaced in a reference cycle (through the
    # qconfig it attached): 96 MB of whisper-base's decoder, resident until the cyclic collector's
    # next full pass. Collect now, so start-up's malloc_trim hands that memory back.
    gc.collect()
    return True


def _encode_in_slices(encoder: nn.Module, rows: int = ENCODER_ROWS) -> None:
    """Make ``encoder`` encode a batch ``rows`` inputs at a time and join the outputs: the
    decoder still decodes the whole batch together. Measured (whisper-base, bfloat16 encoder,
    24 windows of 30 s, 2 cores, a scratch probe): in one call +444-466 MB above the loaded model
    at its peak and 7.3-8.5 s; 8 at a time +158-314 MB, 6.4-6.7 s; 4 at a time +95-243 MB,
    5.8-6.2 s (the batch's activations no longer fall out of the caches). A call that asks
    for the encoder's attentions or hidden states is left whole."""
    whole = encoder.forward

    def forward(input_features: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> Any:
        if (input_features is None or len(input_features) <= rows or args
                or kwargs.get("output_attentions") or kwargs.get("output_hidden_states")):
            return whole(input_features, *args, **kwargs)
        parts = [whole(input_features[first : first + rows], **kwargs) for first in range(0, len(input_features), rows)]
        if isinstance(parts[0], tuple):
            return (torch.cat([part[0] for part in parts]), *parts[0][1:])
        joined = parts[0]
        joined.last_hidden_state = torch.cat([part.last_hidden_state for part in parts])
        return joined

    encoder.forward = forward


def _features_to_bfloat16(_module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    if args:
        args = (args[0].to(torch.bfloat16), *args[1:])
    if kwargs.get("input_features") is not None:
        kwargs["input_features"] = kwargs["input_features"].to(torch.bfloat16)
    return args, kwargs


def _hidden_states_to_float32(_module: nn.Module, _args: Any, output: Any) -> Any:
    if isinstance(output, tuple):
        return (output[0].float(), *output[1:])
    output.last_hidden_state = output.last_hidden_state.float()
    return output
