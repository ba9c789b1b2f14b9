"""Known speakers: give diarized voices the names of the enrolment clips they match.

A request may send a few seconds of each speaker it knows (``parameters.known_speakers``, the
OpenAI API's ``known_speaker_names[]`` + ``known_speaker_references[]``). Each clip is embedded
with the diarization pipeline's own speaker-embedding model and compared, by cosine similarity,
with each diarized speaker's embedding (pyannote's centroid over their turns). Names are given
one to one, the most similar pairs first overall (an assignment, not a greedy choice per name),
and only above ``NAMING_THRESHOLD``: a clip whose voice is not in the recording names nobody, and
a speaker who matches no clip keeps an anonymous label. Pure numpy and scipy: testable without torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# Cosine similarity a diarized speaker and an enrolment clip must reach to share a name.
# Calibrated with bench/quality/enrolment.py (docs/quality.md, "Named speakers"): clips of a speaker's
# own voice scored 0.67-0.97 against them (real readers and meeting speakers, synthetic voices);
# voices absent from the file at most 0.28 when real and 0.60 when synthetic (two espeak-ng
# voices, one formant synthesiser). The threshold sits between: a wrong name is worse than none.
NAMING_THRESHOLD = 0.62
# On a telephone-band recording, with the clips embedded through the same band (pipeline/bandwidth.py), voices
# score lower overall, their own as well as others': calibrated apart with bench/quality/enrolment_channels.py. Through
# G.711, AMR-NB and 8-kbit/s Opus, clips of the person scored 0.36-0.80 (median 0.56), absent people at most 0.37.
TELEPHONE_NAMING_THRESHOLD = 0.45
MIN_REFERENCE_SPEECH_S = 1.0  # less speech than this embeds a voice too poorly to name anyone by
MAX_REFERENCE_S = 30.0  # an enrolment clip is a few seconds; a longer one is a mistake (or a load)


@dataclass(frozen=True)
class NameMatch:
    """How a known speaker fared: the diarized label it was given to (None: nobody) and the
    best similarity any diarized speaker reached with its clip."""

    name: str
    speaker: str | None
    similarity: float | None
    needed: float = NAMING_THRESHOLD  # the threshold it was held to


def cosine_similarities(speakers: np.ndarray, references: np.ndarray) -> np.ndarray:
    """``speakers x references`` cosine similarities of two stacks of embeddings."""
    speakers = speakers / np.linalg.norm(speakers, axis=1, keepdims=True)
    references = references / np.linalg.norm(references, axis=1, keepdims=True)
    return speakers @ references.T


def match_names(
    speaker_embeddings: Mapping[str, np.ndarray],
    reference_embeddings: Mapping[str, np.ndarray],
    threshold: float = NAMING_THRESHOLD,
) -> list[NameMatch]:
    """One ``NameMatch`` per reference, in the references' order.

    The assignment maximises the summed similarity over one-to-one pairs (scipy's
    ``linear_sum_assignment``), so a clip that is close to two speakers cannot take the one a
    better-matching clip needs; pairs below ``threshold`` are then dropped.
    """
    from scipy.optimize import linear_sum_assignment

    names = list(reference_embeddings)
    labels = list(speaker_embeddings)
    if not names or not labels:
        return [NameMatch(name, None, None, threshold) for name in names]
    similarity = cosine_similarities(
        np.stack([speaker_embeddings[label] for label in labels]), np.stack([reference_embeddings[name] for name in names])
    )
    rows, columns = linear_sum_assignment(similarity, maximize=True)
    given = {names[column]: labels[row] for row, column in zip(rows, columns, strict=True) if similarity[row, column] >= threshold}
    return [NameMatch(name, given.get(name), float(similarity[:, index].max()), threshold) for index, name in enumerate(names)]


def naming_threshold(telephone_band: bool) -> float:
    """The similarity a name needs: ``TELEPHONE_NAMING_THRESHOLD`` when the recording and the clips
    were compared through a telephone band, else ``NAMING_THRESHOLD``."""
    return TELEPHONE_NAMING_THRESHOLD if telephone_band else NAMING_THRESHOLD


def unmatched_warnings(matches: list[NameMatch]) -> list[str]:
    """What the client should hear about a known speaker who was given to nobody."""
    return [
        f"known speaker {match.name!r} matched no voice in this audio"
        + (f" (closest similarity {match.similarity:.2f}, {match.needed:g} needed)" if match.similarity is not None else "")
        for match in matches
        if match.speaker is None
    ]


def speech_of(samples: np.ndarray, regions: list[tuple[int, int]]) -> np.ndarray:
    """The clip's speech alone (Silero's regions, joined): pauses and noise would blur its voice."""
    if not regions:
        return samples[:0]
    return np.concatenate([samples[start:end] for start, end in regions])
