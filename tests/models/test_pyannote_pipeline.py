"""The embedded pipeline class, its clustering, and the folder pyannote loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from speaker_transcripts.models.moonshine_blobs import Community1Parts
from speaker_transcripts.models.pyannote_pipeline import (
    EmbeddedSpeakerDiarization,
    ShortTurnsAgglomerativeClustering,
    write_community1_folder,
    write_pipeline_folder,
)


def test_vbx_without_a_plda_and_other_clusterings_are_refused():
    with pytest.raises(ValueError, match="VBxClustering needs a trained PLDA"):
        EmbeddedSpeakerDiarization(clustering="VBxClustering")
    with pytest.raises(ValueError, match="AgglomerativeClustering or VBxClustering; got OracleClustering"):
        EmbeddedSpeakerDiarization(clustering="OracleClustering")


def test_speakers_with_short_turns_take_part_in_clustering():
    """A speaker with 1 s of their own in a 10-s chunk counts once min_active_ratio allows it
    (pyannote's fixed 20 % left such speakers out of the clustering altogether)."""
    from pyannote.core import SlidingWindow, SlidingWindowFeature

    frames = 589
    activity = np.zeros((4, frames, 2))
    activity[:, :400, 0] = 1.0  # a long talker in every chunk
    activity[:, 450:510, 1] = 1.0  # 60 frames, about 1 s: a short answer
    segmentations = SlidingWindowFeature(activity, SlidingWindow(start=0.0, duration=10.0, step=1.0))
    embeddings = np.random.default_rng(0).standard_normal((4, 2, 8))
    pipeline = ShortTurnsAgglomerativeClustering()
    for ratio, kept in ((0.2, 4), (0.05, 8)):
        pipeline.min_active_ratio = ratio
        assert len(pipeline.filter_embeddings(embeddings, segmentations=segmentations)[0]) == kept


def test_the_assembled_folder_loads_offline_and_diarizes(tiny_pyannote, tmp_path, speech_wav):
    """Tiny random segmentation + random CAM++: the layout, the class loading and a full run."""
    import tiny_models
    from pyannote.audio import Pipeline

    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.diarization import diarize, turns_from_output

    folder = tmp_path / "pipeline"
    write_pipeline_folder(tiny_pyannote / "segmentation" / "pytorch_model.bin",
                          tiny_models.build_campplus_weights(tmp_path / "campplus.pt"), folder)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["pipeline"]["name"] == "speaker_transcripts.models.pyannote_pipeline.EmbeddedSpeakerDiarization"
    assert config["params"]["clustering"]["min_active_ratio"] < 0.2  # short turns count

    pipeline = Pipeline.from_pretrained(folder)
    assert isinstance(pipeline.clustering, ShortTurnsAgglomerativeClustering)
    samples = decode_file(speech_wav).samples
    output = pipeline({"waveform": torch.from_numpy(as_float32(samples))[None], "sample_rate": 16000}, num_speakers=1)
    assert len(output.speaker_diarization.labels()) <= 1
    held = diarize(pipeline, samples, 16000, {"num_speakers": 1})  # the request's 16-bit, float32 batch by batch
    assert held.timeline == turns_from_output(output, exclusive=False)


def test_the_community1_folder_loads_offline_and_diarizes_with_vbx_and_its_plda(tiny_pyannote, tmp_path, speech_wav):
    """Tiny random segmentation + a stand-in WeSpeaker graph in ORT format + a random PLDA: community-1's
    layout (plda/ beside the models), its clustering and settings, and a full run."""
    import tiny_models
    from pyannote.audio import Pipeline
    from pyannote.audio.pipelines.clustering import VBxClustering

    from speaker_transcripts.models.wespeaker_onnx import OnnxWeSpeakerResNet34
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.diarization import diarize, turns_from_output

    rng = np.random.default_rng(0)
    parts = Community1Parts(
        embedding_ort=tiny_models.build_wespeaker_ort(tmp_path / "ort"),
        xvec_transform={"mean1": rng.normal(size=256), "mean2": rng.normal(size=128).astype(np.float32),
                        "lda": rng.normal(size=(256, 128)).astype(np.float32)},
        plda={"mu": rng.normal(size=128), "tr": np.eye(128) + 0.05 * rng.normal(size=(128, 128)),
              "psi": rng.uniform(0.5, 2.0, size=128)},
    )
    folder = tmp_path / "community1"
    write_community1_folder(tiny_pyannote / "segmentation" / "pytorch_model.bin", parts, folder)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["params"]["clustering"] == {"threshold": 0.6, "Fa": 0.07, "Fb": 0.8}  # community-1's own
    assert sorted(path.name for path in (folder / "plda").iterdir()) == ["plda.npz", "xvec_transform.npz"]

    pipeline = Pipeline.from_pretrained(folder)
    assert isinstance(pipeline, EmbeddedSpeakerDiarization) and isinstance(pipeline.clustering, VBxClustering)
    assert isinstance(pipeline._embedding.model_, OnnxWeSpeakerResNet34)
    np.testing.assert_allclose(pipeline._plda._plda_psi.shape, (128,))
    samples = decode_file(speech_wav).samples
    output = pipeline({"waveform": torch.from_numpy(as_float32(samples))[None], "sample_rate": 16000})
    assert output.speaker_embeddings.shape[1] == 256
    assert len(output.speaker_diarization.labels()) >= 1
    held = diarize(pipeline, samples, 16000, {})  # the request's 16-bit samples through the ONNX model, float32 batch by batch
    assert held.timeline == turns_from_output(output, exclusive=False)


def test_linkage_runs_over_a_bounded_share_and_the_rest_join_the_nearest_cluster(monkeypatch):
    """Linkage holds every pairwise distance twice (0.5 GB at the end of a 3-h file's diarization):
    beyond ``MAX_LINKAGE_EMBEDDINGS`` it links an evenly spaced share and gives the others the nearest
    cluster, and three well-separated voices come out as they do linked whole."""
    from pyannote.audio.pipelines import clustering

    from speaker_transcripts.models import pyannote_pipeline

    rng = np.random.default_rng(0)
    voices = rng.standard_normal((3, 16)) * 4
    embeddings = np.vstack([voice + rng.standard_normal((300, 16)) * 0.3 for voice in voices])[rng.permutation(900)]
    pipeline = ShortTurnsAgglomerativeClustering()
    pipeline.instantiate({"method": "average", "threshold": 0.6, "min_cluster_size": 3, "min_active_ratio": 0.05})
    linked: list[int] = []
    linkage = clustering.linkage
    monkeypatch.setattr(clustering, "linkage", lambda rows, **options: linked.append(len(rows)) or linkage(rows, **options))
    whole = pipeline.cluster(embeddings.copy(), min_clusters=1, max_clusters=10)
    monkeypatch.setattr(pyannote_pipeline, "MAX_LINKAGE_EMBEDDINGS", 200)
    bounded = pipeline.cluster(embeddings.copy(), min_clusters=1, max_clusters=10)
    assert linked == [900, 200]
    assert len(set(whole)) == 3 and len(set(zip(whole, bounded, strict=True))) == 3, "the same three voices"
