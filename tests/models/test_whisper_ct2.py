"""The CTranslate2 -> transformers Whisper converter, checked against CTranslate2's own writer.

A tiny random transformers Whisper goes through ``ctranslate2``'s ``TransformersConverter``
(an independent implementation of the mapping, in the reverse direction) and back through
``speaker_transcripts.models.whisper_ct2``; every weight and the greedy output must survive the trip.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from speaker_transcripts.models.whisper_ct2 import ConversionError, convert, read_ct2

ct2_converters = pytest.importorskip("ctranslate2.converters", reason="ctranslate2 is in requirements-dev.txt")


@pytest.fixture(scope="module")
def ct2_folder(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny multilingual Whisper in faster-whisper's layout: model.bin, config.json, tokenizer.json."""
    folder = tmp_path_factory.mktemp("ct2") / "model"
    ct2_converters.TransformersConverter(str(tiny_models["whisper"])).convert(str(folder), quantization="float32")
    shutil.copyfile(tiny_models["whisper"] / "tokenizer.json", folder / "tokenizer.json")
    return folder


def _greedy_tokens(model_dir: Path) -> list[int]:
    from transformers import WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    features = torch.from_numpy(np.random.default_rng(1).standard_normal((1, model.config.num_mel_bins, 3000)).astype(np.float32))
    with torch.inference_mode():
        return model.generate(features, language="en", task="transcribe", num_beams=1, do_sample=False, max_new_tokens=16).tolist()[0]


def test_round_trip_keeps_every_weight_and_the_greedy_output(tiny_models, ct2_folder, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoProcessor, WhisperForConditionalGeneration

    convert([ct2_folder], tmp_path / "hf", name="tiny", dtype="float32", multilingual=True)

    original = WhisperForConditionalGeneration.from_pretrained(tiny_models["whisper"]).state_dict()
    converted = load_file(tmp_path / "hf" / "model.safetensors")
    expected = {name: tensor for name, tensor in original.items() if name != "proj_out.weight"}  # tied to embed_tokens
    assert set(converted) == set(expected)
    for name, tensor in expected.items():
        assert torch.equal(converted[name], tensor), name
    assert _greedy_tokens(tmp_path / "hf") == _greedy_tokens(tiny_models["whisper"])

    processor = AutoProcessor.from_pretrained(tmp_path / "hf")
    assert processor.tokenizer.convert_tokens_to_ids("<|0.00|>") == processor.tokenizer.convert_tokens_to_ids("<|notimestamps|>") + 1
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert generation["is_multilingual"] and set(generation["lang_to_id"]) == {"<|en|>", "<|de|>", "<|fr|>", "<|es|>"}


def test_model_split_into_parts_across_folders_converts_the_same(ct2_folder, tmp_path):
    data = (ct2_folder / "model.bin").read_bytes()
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    (first / "model.bin.part1").write_bytes(data[: len(data) // 3])
    (second / "model.bin.part2").write_bytes(data[len(data) // 3 :])
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(ct2_folder / name, second / name)
    convert([first, second], tmp_path / "split", name="tiny", dtype="float32")
    convert([ct2_folder], tmp_path / "whole", name="tiny", dtype="float32")
    assert (tmp_path / "split" / "model.safetensors").read_bytes() == (tmp_path / "whole" / "model.safetensors").read_bytes()


def test_missing_part_is_a_clear_error(ct2_folder, tmp_path):
    data = (ct2_folder / "model.bin").read_bytes()
    (tmp_path / "model.bin.part1").write_bytes(data[: len(data) // 2])
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(ct2_folder / name, tmp_path / name)
    with pytest.raises(ConversionError, match="truncated inside variable .*part file missing"):
        convert([tmp_path], tmp_path / "out", name="tiny")
    (tmp_path / "model.bin.part3").write_bytes(data[len(data) // 2 :])
    with pytest.raises(ConversionError, match=r"not contiguous: \[1, 3\]"):
        convert([tmp_path], tmp_path / "out", name="tiny")


def test_float16_storage_loads_as_float32_with_the_same_values(ct2_folder, tmp_path):
    from safetensors.torch import load_file

    convert([ct2_folder], tmp_path / "half", name="tiny")  # the default: float16 on disk
    half = load_file(tmp_path / "half" / "model.safetensors")
    assert {tensor.dtype for tensor in half.values()} == {torch.float16}
    full = read_ct2([ct2_folder / "model.bin"]).array("decoder/embeddings/weight", np.float32)
    assert np.allclose(half["model.decoder.embed_tokens.weight"].float().numpy(), full, atol=1e-3)


def test_other_ct2_models_are_refused(ct2_folder, tmp_path):
    data = bytearray((ct2_folder / "model.bin").read_bytes())
    spec = data.index(b"WhisperSpec")
    data[spec : spec + len(b"WhisperSpec")] = b"BertSpecXYZ"
    (tmp_path / "model.bin").write_bytes(bytes(data))
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(ct2_folder / name, tmp_path / name)
    with pytest.raises(ConversionError, match="not a CT2 Whisper model"):
        convert([tmp_path], tmp_path / "out", name="tiny")
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(ConversionError, match="lack tokenizer.json"):
        convert([tmp_path], tmp_path / "out", name="tiny")
