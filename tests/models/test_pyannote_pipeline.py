"""The embedded pipeline class, its clustering, and the folder pyannote loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from speaker_transcripts.models.pyannote_pipeline import (
    EmbeddedSpeakerDiarization,
    ShortTurnsAgglomerativeClustering,
    write_pipeline_folder,
)


def test_vbx_is_refused_because_there_is_no_plda(tmp_path):
    with pytest.raises(ValueError, match="AgglomerativeClustering only; VBxClustering needs what it lacks"):
        EmbeddedSpeakerDiarization(clustering="VBxClustering")


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

    from speaker_transcripts.pipeline.audio import decode_file

    folder = tmp_path / "pipeline"
    write_pipeline_folder(tiny_pyannote / "segmentation" / "pytorch_model.bin",
                          tiny_models.build_campplus_weights(tmp_path / "campplus.pt"), folder)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["pipeline"]["name"] == "speaker_transcripts.models.pyannote_pipeline.EmbeddedSpeakerDiarization"
    assert config["params"]["clustering"]["min_active_ratio"] < 0.2  # short turns count

    pipeline = Pipeline.from_pretrained(folder)
    assert isinstance(pipeline.clustering, ShortTurnsAgglomerativeClustering)
    samples = decode_file(speech_wav).samples
    output = pipeline({"waveform": torch.from_numpy(samples)[None], "sample_rate": 16000}, num_speakers=1)
    assert len(output.speaker_diarization.labels()) <= 1


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
