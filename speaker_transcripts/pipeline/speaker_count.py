"""When diarization's speaker count is in doubt, say so, so that a user who knows can pass it.

Measured on the dev conversations, the 12 AMI excerpts and the quick conversations of
``bench/quick_conversations.py`` (``bench/speaker_count.py``, docs/quality.md), two cases carry most of
the wrong counts, and both can be seen in what diarization returns:

- **one voice on a short recording**: pyannote's segmentation looks at 10 s at a time; when two people
  trade turns of a second or two it can hear one voice throughout, and no clustering threshold then
  separates them (a 26-s two-person exchange came out as one speaker; right with ``num_speakers=2``).
  One person talking alone looks the same to diarization; the transcript's phrase check tells them apart:
  the two halves of one person's phrases lie close (``ONE_VOICE_SPREAD``);
- **two voices close together**: the centroids of two found speakers only a little further apart than
  the clustering threshold, where one more or one fewer speaker is as plausible.

Only counts diarization chose itself are questioned: with ``num_speakers`` given, there is no doubt.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from speaker_transcripts.pipeline.diarization import Turn

SHORT_SPEECH_S = 60.0  # one voice in less speech than this is questioned (a few embeddings per voice at most)
CLOSE_VOICES = 0.65  # cosine distance between two speakers' centroids below which they may be one person
# One voice whose phrases' two halves (phrase_speakers.Checked.spread) lie closer than this is one person. Measured
# (scratch replay of bench/speaker_count.py's sets, 4 December 2026): the 9 one-voice recordings 0.11-0.49 (two
# with too few phrases to tell), the quick exchanges heard as one voice 0.49 (0.493), 0.56, 0.78 (two too few).
ONE_VOICE_SPREAD = 0.5
COUNT_ADVICE = "pass num_speakers if you know how many people spoke"


def count_doubts(turns: Sequence[Turn], centroids: Mapping[str, np.ndarray], spread: float | None = None) -> list[str]:
    """Warnings (none, or one) about the number of speakers in ``turns`` (the exclusive turns the
    words are attributed from: a voice heard only in overlap gets no words), from their total
    speech, the distances between the speakers' ``centroids`` and, for one voice, the ``spread`` of its
    phrases (None: not known, so questioned). Less than a second of speech is not questioned: there is
    nothing to attribute."""
    speakers = list(dict.fromkeys(turn.speaker for turn in turns))
    speech = sum(turn.end - turn.start for turn in turns)
    one_person = spread is not None and spread < ONE_VOICE_SPREAD
    if len(speakers) == 1 and 1.0 <= speech < SHORT_SPEECH_S and not one_person:
        heard = f"diarization gave all {speech:.0f} s of speech to one voice"
        return [f"{heard}; in a short exchange of quick turns a second voice can go unheard: {COUNT_ADVICE}"]
    close = closest_pair({speaker: centroids[speaker] for speaker in speakers if speaker in centroids})
    if close is not None and close[2] < CLOSE_VOICES:
        first, second, _ = close
        return [f"{first} and {second} sound alike and may be one person (or the count off by one): {COUNT_ADVICE}"]
    return []


def closest_pair(centroids: Mapping[str, np.ndarray]) -> tuple[str, str, float] | None:
    """The two speakers whose voices are nearest (cosine distance), or None with fewer than two."""
    best: tuple[str, str, float] | None = None
    for (first, a), (second, b) in itertools.combinations(centroids.items(), 2):
        norms = float(np.linalg.norm(a) * np.linalg.norm(b))
        if norms == 0.0:  # a padded (all-zero) centroid: no voice to compare
            continue
        distance = 1.0 - float(np.dot(a, b)) / norms
        if best is None or distance < best[2]:
            best = (first, second, distance)
    return best
