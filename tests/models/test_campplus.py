"""CAM++ behind pyannote's Model interface, on random weights (the trained ones: test_embedded_real.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from speaker_transcripts.models.campplus import (
    EMBEDDING_SIZE,
    CamPlusPlus,
    save_pyannote_checkpoint,
)


@pytest.fixture(scope="module")
def random_campplus(tmp_path_factory: pytest.TempPathFactory) -> tuple[CamPlusPlus, Path]:
    """A random CAM++ as 3D-Speaker saves it, and the same network as a module."""
    import tiny_models

    path = tiny_models.build_campplus_weights(tmp_path_factory.mktemp("campplus") / "campplus.pt")
    state = torch.load(path, weights_only=True)
    model = CamPlusPlus().eval()
    model.load_state_dict({key.replace("xvector.dense.", "dense.", 1): value for key, value in state.items()})
    return model, path


def test_checkpoint_loads_through_pyannote_with_the_same_weights(random_campplus, tmp_path):
    from pyannote.audio import Model

    model, weights = random_campplus
    save_pyannote_checkpoint(weights, tmp_path / "embedding" / "pytorch_model.bin")
    loaded = Model.from_pretrained(tmp_path / "embedding" / "pytorch_model.bin").eval()
    assert isinstance(loaded, CamPlusPlus) and loaded.dimension == EMBEDDING_SIZE
    waveforms = torch.randn(2, 1, 32000) * 0.1
    with torch.inference_mode():
        assert torch.allclose(loaded(waveforms), model(waveforms), atol=1e-5)


def test_a_state_dict_of_another_shape_is_refused(tmp_path):
    torch.save({"head.conv1.weight": torch.zeros(1)}, tmp_path / "wrong.pt")
    with pytest.raises(RuntimeError, match="state_dict"):
        save_pyannote_checkpoint(tmp_path / "wrong.pt", tmp_path / "out.bin")


def test_each_speaker_is_embedded_from_its_own_samples(random_campplus):
    """CAM++'s context layers average over their whole input, so a speaker's embedding is
    computed on the samples under its mask, not on the whole chunk with the mask applied after."""
    model, _ = random_campplus
    waveforms = torch.randn(2, 1, 32000) * 0.1
    frames = 100
    masks = torch.zeros(2, frames)
    masks[0, :50], masks[1, 60:] = 1.0, 1.0
    with torch.inference_mode():
        embedded = model(waveforms, weights=masks)
        first_alone = model(waveforms[:1, :, :16000])
        second_alone = model(waveforms[1:, :, 19200:])
    assert torch.allclose(embedded[0], first_alone[0], atol=1e-5)
    assert torch.allclose(embedded[1], second_alone[0], atol=1e-5)


def test_too_little_own_speech_falls_back_to_masked_pooling_over_the_chunk(random_campplus):
    model, _ = random_campplus
    waveform = torch.randn(1, 1, 32000) * 0.1
    mask = torch.zeros(1, 100)
    mask[0, 10:12] = 1.0  # 0.04 s of the speaker's own speech
    with torch.inference_mode():
        embedded = model(waveform, weights=mask)
        pooled = model.dense(model.pooling(model.forward_frames(waveform), weights=mask))
    assert torch.allclose(embedded, pooled, atol=1e-6) and torch.isfinite(embedded).all()


def test_a_silent_local_speaker_costs_nothing_and_embeds_as_masked_pooling_would(random_campplus):
    """pyannote asks for every (chunk, local speaker) pair; for one with no frame at all the
    network is skipped, and the answer equals pooling the chunk's frames with an all-zero mask."""
    model, _ = random_campplus
    waveform = torch.randn(1, 1, 160000) * 0.1
    silent = torch.zeros(1, 589)
    with torch.inference_mode():
        full = model.dense(model.pooling(model.forward_frames(waveform), weights=silent))
        calls = []
        handle = model.xvector.register_forward_hook(lambda *_: calls.append(1))
        try:
            skipped = model(waveform, weights=silent)
        finally:
            handle.remove()
    assert calls == [] and torch.allclose(skipped, full, atol=1e-6)
