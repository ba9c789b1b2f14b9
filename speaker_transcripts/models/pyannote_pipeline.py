"""The embedded diarization pipelines: pyannote segmentation-3.0 with CAM++ or community-1's embeddings.

``pyannote-campplus``: segmentation-3.0 + CAM++, no PLDA. pyannote 4's ``SpeakerDiarization`` always
loads a PLDA, which only its VBx clustering reads, and no PLDA for CAM++ exists; this subclass hands it
a placeholder and clusters agglomeratively, changed to let speakers with short turns take part, with
settings tuned on the dev conversations and AMI excerpts (``bench/quality/tune_diarization.py``;
spectral clustering measured 4 DER points worse, docs/quality.md).

``pyannote-community1``: community-1's recipe (segmentation-3.0, the WeSpeaker ResNet34 of
``wespeaker_onnx.py``, its PLDA and VBx clustering), on the same subclass so that it shares
embeddings between chunks. ``write_pipeline_folder`` and ``write_community1_folder`` lay out folders
that ``pyannote.audio.Pipeline.from_pretrained`` loads offline like any Hub pipeline.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pyannote.audio.core.plda import PLDA
from pyannote.audio.pipelines import SpeakerDiarization
from pyannote.audio.pipelines.clustering import AgglomerativeClustering
from pyannote.core import SlidingWindowFeature
from pyannote.pipeline.parameter import Uniform
from scipy.spatial.distance import cdist

from speaker_transcripts.models import campplus, wespeaker_onnx
from speaker_transcripts.models.chunk_embeddings import plan_embeddings, shared_embeddings
from speaker_transcripts.models.moonshine_blobs import Community1Parts

# Tuned with bench/quality/tune_diarization.py on the dev conversations and AMI excerpts (docs/quality.md, "Diarization with the embedded pipeline").
PIPELINE_PARAMS: dict[str, Any] = {
    # Gaps under 0.3 s inside a speaker's speech are filled: dev conversations 7.5 -> 4.8 % DER, AMI unchanged.
    "segmentation": {"min_duration_off": 0.3},
    # min_cluster_size 3 (pyannote lowers it to 10 % of the embeddings on short files): a 3-voice quick conversation
    # no longer gets a 4th speaker from 2 stray embeddings; count right 20 -> 21 of 33 files, DER unchanged on all.
    "clustering": {"min_active_ratio": 0.05, "method": "average", "threshold": 0.6, "min_cluster_size": 3},
}
PIPELINE_OPTIONS: dict[str, Any] = {
    "segmentation_step": 0.25,  # of the 10-s window: 2.1x faster than pyannote's 0.1 for +0.8 DER points on AMI
    # 8 chunks a batch instead of 32: a 10-min file's diarization peaked 206 MB above the loaded pipeline instead of
    # 398 MB, in 13.3 s instead of 16.0 (one thread, a scratch probe: docs/performance.md); SincNet's first layer is most of a batch.
    "segmentation_batch_size": 8,
    "embedding_batch_size": 8,
    "embedding_exclude_overlap": True,
    # One chunk in 3 embedded, the others borrow where the voices coincide (chunk_embeddings.py): AMI 28.6 -> 28.4 % DER,
    # dev conversations 4.8 % both, count right 5 -> 6 of 14, 1.7x less time on those files; a stride of 4 gave 31.4 %.
    "embedding_stride": 3,
}

# community-1's own settings, as moonshine-voice embeds them beside the models (pipeline_snapshot_json):
# pyannote's segmentation step of 0.1, VBx with threshold 0.6, Fa 0.07, Fb 0.8, no gap filling.
COMMUNITY1_PARAMS: dict[str, Any] = {
    "segmentation": {"min_duration_off": 0.0},
    "clustering": {"threshold": 0.6, "Fa": 0.07, "Fb": 0.8},
}
COMMUNITY1_OPTIONS: dict[str, Any] = {
    "segmentation_step": 0.1,
    "segmentation_batch_size": 8,
    "embedding_batch_size": 8,
    "embedding_exclude_overlap": True,
    "embedding_stride": 1,
}

# Embeddings that agglomerative clustering links all at once (n^2 / 2 float64 distances, copied once by scipy:
# 122 MB at 4,000); a 30-min two-voice file has about 1,440 (720 chunks, two voices active in most).
MAX_LINKAGE_EMBEDDINGS = 4000


class _NoPLDA(PLDA):
    """Stands in for the PLDA that only VBx clustering reads; this pipeline refuses VBx."""

    def __init__(self) -> None:  # no transforms to load
        pass


class ShortTurnsAgglomerativeClustering(AgglomerativeClustering):
    """pyannote's agglomerative clustering, letting speakers with short turns into it.

    pyannote clusters only the (chunk, speaker) embeddings with at least 20 % of the 10-s chunk
    (2 s) of speech of their own; the others are then given the nearest cluster. A speaker who
    never talks 2 s at a stretch (backchannels, a quick answer) then never forms a cluster of
    their own: two readers taking turns of 2.8 s and 7 s came out as one speaker. This makes the
    share a hyper-parameter (``min_active_ratio``); the embedding model embeds from 0.5 s.
    """

    def __init__(self, metric: str = "cosine", constrained_assignment: bool = False) -> None:
        super().__init__(metric=metric, constrained_assignment=constrained_assignment)
        self.min_active_ratio = Uniform(0.0, 0.5)

    def filter_embeddings(
        self, embeddings: np.ndarray, segmentations: SlidingWindowFeature | None = None, min_active_ratio: float = 0.2
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return super().filter_embeddings(embeddings, segmentations=segmentations, min_active_ratio=self.min_active_ratio)

    def cluster(
        self, embeddings: np.ndarray, min_clusters: int | None = None, max_clusters: int | None = None, num_clusters: int | None = None
    ) -> np.ndarray:
        """pyannote's clustering, its linkage over at most ``MAX_LINKAGE_EMBEDDINGS``: beyond, over an
        evenly spaced share of them, the others joining the cluster with the nearest centroid (as
        pyannote assigns the embeddings it leaves out of clustering). Linkage holds every pairwise
        distance twice: a 3-h two-voice file's 8,640 embeddings took 571 MB more (122 MB at 4,000).
        Files up to about 2 h have fewer and are clustered as before."""
        if len(embeddings) <= MAX_LINKAGE_EMBEDDINGS:
            return super().cluster(embeddings, min_clusters=min_clusters, max_clusters=max_clusters, num_clusters=num_clusters)
        chosen = np.linspace(0, len(embeddings) - 1, MAX_LINKAGE_EMBEDDINGS).round().astype(int)
        linked = embeddings[chosen]
        clusters = super().cluster(linked, min_clusters=min_clusters, max_clusters=max_clusters, num_clusters=num_clusters)
        labels = np.unique(clusters)
        centroids = np.vstack([linked[clusters == label].mean(axis=0) for label in labels])
        nearest = labels[np.argmin(cdist(embeddings, centroids, metric=self.metric), axis=1)]
        nearest[chosen] = clusters
        return nearest


class EmbeddedSpeakerDiarization(SpeakerDiarization):
    """``SpeakerDiarization`` with embeddings shared between neighbouring chunks
    (``chunk_embeddings.py``: one chunk in ``embedding_stride`` is embedded, the chunks between
    borrow where the voices coincide), clustered either by ``ShortTurnsAgglomerativeClustering``,
    which needs no PLDA, or by pyannote's VBx with the folder's PLDA (community-1)."""

    def __init__(
        self, clustering: str = "AgglomerativeClustering", embedding_stride: int = 1, plda: Any = None, **options: Any
    ) -> None:
        if embedding_stride < 1:
            raise ValueError(f"embedding_stride is a number of chunks, 1 or more; got {embedding_stride}")
        if clustering == "AgglomerativeClustering":
            super().__init__(clustering=clustering, plda=_NoPLDA(), **options)
            self.clustering = ShortTurnsAgglomerativeClustering(metric=self._embedding.metric)
        elif clustering == "VBxClustering":
            if plda is None:
                raise ValueError("VBxClustering needs a trained PLDA (the folder's plda/, as write_community1_folder lays it out)")
            super().__init__(clustering=clustering, plda=plda, **options)
        else:
            raise ValueError(f"this pipeline clusters with AgglomerativeClustering or VBxClustering; got {clustering}")
        self.embedding_stride = embedding_stride

    def get_embeddings(
        self,
        file: Any,
        binary_segmentations: SlidingWindowFeature,
        exclude_overlap: bool = False,
        hook: Callable[..., Any] | None = None,
    ) -> np.ndarray:
        """pyannote's embeddings, computed for the chunks the plan embeds: the others are handed
        to the model silent (answered without running it) and then take their partners'."""
        step_frames = binary_segmentations.sliding_window.step / self._segmentation.model.receptive_field.step
        plan = plan_embeddings(binary_segmentations.data, step_frames, self.embedding_stride)
        embedded_only = SlidingWindowFeature(
            binary_segmentations.data * plan.embedded[:, None, None], binary_segmentations.sliding_window
        )
        embeddings = super().get_embeddings(file, embedded_only, exclude_overlap=exclude_overlap, hook=hook)
        return shared_embeddings(embeddings, plan)


def write_pipeline_folder(segmentation_checkpoint: Path, campplus_weights: Path, destination: Path) -> None:
    """``config.yaml`` + ``segmentation/`` + ``embedding/`` (CAM++ as a pyannote checkpoint)."""
    _copy_segmentation(segmentation_checkpoint, destination)
    campplus.save_pyannote_checkpoint(campplus_weights, destination / "embedding" / "pytorch_model.bin")
    _write_config(destination, {"clustering": "AgglomerativeClustering", **PIPELINE_OPTIONS}, PIPELINE_PARAMS)


def write_community1_folder(segmentation_checkpoint: Path, parts: Community1Parts, destination: Path) -> None:
    """``config.yaml`` + ``segmentation/`` + ``embedding/`` (the ORT model in a pyannote checkpoint)
    + ``plda/`` (``xvec_transform.npz`` and ``plda.npz``, the files pyannote's ``PLDA`` reads)."""
    _copy_segmentation(segmentation_checkpoint, destination)
    wespeaker_onnx.save_pyannote_checkpoint(parts.embedding_ort, destination / "embedding" / "pytorch_model.bin")
    (destination / "plda").mkdir(parents=True, exist_ok=True)
    np.savez(destination / "plda" / "xvec_transform.npz", **parts.xvec_transform)
    np.savez(destination / "plda" / "plda.npz", **parts.plda)
    _write_config(
        destination, {"clustering": "VBxClustering", "plda": "$model/plda", **COMMUNITY1_OPTIONS}, COMMUNITY1_PARAMS
    )


def _copy_segmentation(segmentation_checkpoint: Path, destination: Path) -> None:
    (destination / "segmentation").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(segmentation_checkpoint, destination / "segmentation" / "pytorch_model.bin")


def _write_config(destination: Path, options: dict[str, Any], params: dict[str, Any]) -> None:
    config = {
        "pipeline": {
            "name": f"{EmbeddedSpeakerDiarization.__module__}.{EmbeddedSpeakerDiarization.__name__}",
            "params": {"segmentation": "$model/segmentation", "embedding": "$model/embedding", **options},
        },
        "params": params,
    }
    (destination / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
