"""community-1's WeSpeaker embedding behind pyannote's Model: the ORT graph gets pyannote's fbank and pooling weights."""

from __future__ import annotations

import numpy as np
import pytest
import tiny_models
import torch
import torch.nn.functional as F

from speaker_transcripts.models.wespeaker_onnx import OnnxWeSpeakerResNet34, save_pyannote_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("community1")
    save_pyannote_checkpoint(tiny_models.build_wespeaker_ort(folder), folder / "embedding" / "pytorch_model.bin")
    return folder / "embedding" / "pytorch_model.bin"


def expected(model: OnnxWeSpeakerResNet34, waveforms: torch.Tensor, weights: torch.Tensor) -> np.ndarray:
    """What the stand-in graph computes from pyannote's fbank: the weighted mean frame, projected."""
    fbank = model.compute_fbank(waveforms).numpy()
    frame_weights = F.interpolate(weights[:, None], size=fbank.shape[1], mode="nearest")[:, 0].numpy()
    pooled = (fbank * frame_weights[..., None]).sum(axis=1) / frame_weights.sum(axis=1, keepdims=True)
    return pooled @ np.random.default_rng(0).standard_normal((80, 256)).astype(np.float32)


def test_pyannote_loads_the_checkpoint_and_each_speakers_frames_weigh_their_embedding(checkpoint):
    from pyannote.audio import Model

    model = Model.from_pretrained(checkpoint)
    assert isinstance(model, OnnxWeSpeakerResNet34) and model.dimension == 256
    waveforms = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 1, 32000)).astype(np.float32) * 0.1)
    masks = torch.zeros(2, 117)
    masks[0, :40], masks[1, 60:] = 1.0, 1.0  # a segmentation-rate mask: the first / the second part
    with torch.inference_mode():
        embeddings = model(waveforms, weights=masks).numpy()
        unweighted = model(waveforms).numpy()
    np.testing.assert_allclose(embeddings, expected(model, waveforms, masks), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(unweighted, expected(model, waveforms, torch.ones(2, 117)), rtol=1e-4, atol=1e-3)
    assert not np.allclose(embeddings, unweighted, atol=1e-2), "the pooling weights changed nothing"


def test_pyannotes_speaker_embedding_wrapper_embeds_with_it(checkpoint):
    """The route the diarization pipeline, the live diarizer and enrolment take to the model."""
    from pyannote.audio.pipelines.speaker_verification import PretrainedSpeakerEmbedding

    embedding = PretrainedSpeakerEmbedding({"checkpoint": str(checkpoint.parent.parent), "subfolder": "embedding"})
    waveforms = torch.randn(3, 1, 16000) * 0.1
    vectors = embedding(waveforms, masks=torch.ones(3, 59))
    assert vectors.shape == (3, 256) and embedding.dimension == 256 and np.isfinite(vectors).all()
