"""Which global speaker each voice of a live window is: incremental clustering, as diart does.

Every step the live diarizer sees a few seconds of audio, in which segmentation finds up to three
local speakers, each with an embedding. ``OnlineClustering`` maps them to the session's speakers
(``OnlineSpeakerClustering`` of diart, Coria et al. 2021): one to one, by the assignment of
least summed cosine distance (two voices of one window are never one speaker), a pair kept only
under ``new_speaker_distance``; a local speaker left over becomes a new speaker when it talks
long enough in the window to be trusted (``min_new_speech``), and is otherwise left unlabelled
for this step. A matched speaker's centroid moves towards the new embedding (a running sum of
unit vectors, diart's update) only when it spoke long enough, so short and overlapped speech does
not drag it. Known speakers start as fixed centroids named after their enrolment clips; a voice
takes a name only at ``NAMING_THRESHOLD`` similarity, the file path's rule. Labels, once given,
never change: speakers are never merged or renumbered.

Pure numpy and scipy: tested without a model.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from speaker_transcripts.pipeline.speaker_naming import NAMING_THRESHOLD


@dataclass(frozen=True)
class ClusteringSettings:
    """The hyper-parameters (diart's ``delta_new``, ``rho_update``, ``max_speakers``); tuned on the dev
    conversations and the AMI excerpts with ``bench/live.py`` (docs/quality.md, "Live speakers")."""

    new_speaker_distance: float = 0.7  # cosine distance: a voice farther than this from every centroid is new
    min_new_speech: float = 0.25  # share of the window a voice must fill to found or move a centroid
    max_speakers: int = 20


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class OnlineClustering:
    """The session's speakers: anonymous ``SPEAKER_NN`` in order of appearance, or a known name."""

    def __init__(self, settings: ClusteringSettings, known: Mapping[str, np.ndarray] | None = None) -> None:
        self.settings = settings
        self.labels: list[str] = []
        self.sums: list[np.ndarray] = []  # running sums of unit embeddings; a known speaker's stays its clip's
        self.known = set()
        self._anonymous = 0
        for name, embedding in (known or {}).items():
            self.labels.append(name)
            self.sums.append(_unit(np.asarray(embedding, dtype=np.float64)))
            self.known.add(name)

    def assign(self, embeddings: np.ndarray, speech_share: Sequence[float], taken: Collection[str] = (), learn: bool = True) -> list[str | None]:
        """The global label of each local speaker (rows of ``embeddings``; a NaN row is a voice too
        short to embed, or one labelled already), or None when it stays unlabelled for this window.
        ``taken``: labels the window's other voices already have, which none of these may get.
        ``learn=False``: matched only, no centroid moved and no speaker founded."""
        from scipy.optimize import linear_sum_assignment

        count = len(embeddings)
        result: list[str | None] = [None] * count
        usable = [row for row in range(count) if np.all(np.isfinite(embeddings[row])) and np.any(embeddings[row])]
        if not usable:
            return result
        vectors = np.stack([_unit(np.asarray(embeddings[row], dtype=np.float64)) for row in usable])
        if self.sums:
            centroids = np.stack([_unit(total) for total in self.sums])
            distance = 1.0 - vectors @ centroids.T
            limits = np.array([
                -1.0 if label in taken else 1.0 - NAMING_THRESHOLD if label in self.known else self.settings.new_speaker_distance
                for label in self.labels
            ])
            rows, columns = linear_sum_assignment(distance)
            for row, column in zip(rows, columns, strict=True):
                if distance[row, column] < limits[column]:
                    local = usable[row]
                    result[local] = self.labels[column]
                    if learn and self.labels[column] not in self.known and speech_share[local] >= self.settings.min_new_speech:
                        self.sums[column] = self.sums[column] + vectors[row]
        for position, local in enumerate(usable):
            if learn and result[local] is None and speech_share[local] >= self.settings.min_new_speech and len(self.labels) < self.settings.max_speakers:
                label = f"SPEAKER_{self._anonymous:02d}"
                self._anonymous += 1
                self.labels.append(label)
                self.sums.append(vectors[position].copy())
                result[local] = label
        return result

    def known_name(self, label: str) -> str | None:
        """The known speaker whose clip ``label``'s centroid (its windows' embeddings summed) reaches
        ``NAMING_THRESHOLD`` with, the closest; None when none does. A voice whose first windows each fell
        short of a clip (a window is seconds of speech, the clip's file-path match a whole file's) is named
        by the many windows it has gathered once its words go out."""
        if label in self.known:
            return label
        if label not in self.labels or not self.known:
            return None
        centroid = _unit(self.sums[self.labels.index(label)])
        scores = {name: float(centroid @ _unit(self.sums[self.labels.index(name)])) for name in self.known}
        best = max(scores, key=scores.__getitem__)
        return best if scores[best] >= NAMING_THRESHOLD else None


class SpokenLabels:
    """The labels a client sees: the clustering's anonymous speakers renumbered ``SPEAKER_00``, ``SPEAKER_01``, ...
    in the order their words are first sent, so a speaker the clustering founded but who never labelled a word
    leaves no gap; known names are kept. ``named``: the known name an anonymous speaker takes when its words
    first go out (``OnlineClustering.known_name``), unless another speaker has that name already."""

    def __init__(self, known: Collection[str] = (), named: Callable[[str], str | None] = lambda label: None) -> None:
        self.known = set(known)
        self.named = named
        self.spoken: dict[str, str] = {}

    def __call__(self, label: str) -> str:
        if label in self.known:
            return label
        if label not in self.spoken:
            name = self.named(label)
            if name is None or name in self.spoken.values():
                name = f"SPEAKER_{sum(name not in self.known for name in self.spoken.values()):02d}"
            self.spoken[label] = name
        return self.spoken[label]
