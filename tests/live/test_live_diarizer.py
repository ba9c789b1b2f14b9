"""The live diarizer: who the session's speakers are never depends on when its steps ran."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.live.clustering import ClusteringSettings, OnlineClustering
from speaker_transcripts.live.speakers import LiveDiarizer
from speaker_transcripts.pipeline.audio import as_float32, decode_file

RATE = 16000


@pytest.fixture(scope="module")
def two_turns(speech_wav) -> np.ndarray:
    speech = as_float32(decode_file(speech_wav).samples)
    return np.concatenate([speech, np.zeros(RATE, dtype=np.float32), speech])


def test_windows_off_the_step_grid_teach_the_clustering_nothing(live_handler, two_turns):
    """A turn's end makes the timeline final with one window ending there, off the step grid; whether it
    runs depends on how far the diarizer had got, so on load. The speakers found, and their centroids,
    are the same with such windows at any points as without them."""

    def read(start: int, end: int) -> np.ndarray:
        return two_turns[max(start, 0) : end]

    def diarized(turn_ends_s: tuple[float, ...]) -> LiveDiarizer:
        diarizer = LiveDiarizer(live_handler.diarization_pipeline, OnlineClustering(ClusteringSettings()), RATE)
        for seconds in turn_ends_s:
            diarizer.advance(read, int(seconds * RATE), final=True)
        diarizer.advance(read, len(two_turns), final=True)
        return diarizer

    grid_only = diarized(())
    quiet, busy = diarized((1.23, 2.71, 4.06, 6.37)), diarized((2.93, 5.58))
    assert grid_only.clustering.labels
    for run in (quiet, busy):
        assert run.clustering.labels == grid_only.clustering.labels
        np.testing.assert_allclose(np.stack(run.clustering.sums), np.stack(grid_only.clustering.sums))
