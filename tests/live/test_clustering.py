"""Online clustering: local voices to session speakers, one to one, labels never revised."""

import numpy as np

from speaker_transcripts.live.clustering import ClusteringSettings, OnlineClustering

rng = np.random.default_rng(0)
ANN, BEN, CAL = (rng.standard_normal(16) for _ in range(3))


def near(voice: np.ndarray, noise: float = 0.1) -> np.ndarray:
    return voice + noise * np.linalg.norm(voice) / 4 * rng.standard_normal(voice.shape)


def test_voices_get_stable_labels_in_order_of_appearance():
    clustering = OnlineClustering(ClusteringSettings())
    assert clustering.assign(np.stack([near(ANN)]), [0.8]) == ["SPEAKER_00"]
    assert clustering.assign(np.stack([near(BEN), near(ANN)]), [0.5, 0.4]) == ["SPEAKER_01", "SPEAKER_00"]
    assert clustering.assign(np.stack([near(ANN), near(BEN)]), [0.5, 0.5]) == ["SPEAKER_00", "SPEAKER_01"]


def test_two_voices_of_one_window_are_never_one_speaker():
    clustering = OnlineClustering(ClusteringSettings())
    clustering.assign(np.stack([near(ANN)]), [0.9])
    labels = clustering.assign(np.stack([near(ANN, 0.05), near(ANN, 0.2)]), [0.9, 0.9])
    assert labels[0] == "SPEAKER_00" and labels[1] != "SPEAKER_00"


def test_a_short_unknown_voice_waits_and_a_silent_row_is_skipped():
    clustering = OnlineClustering(ClusteringSettings(min_new_speech=0.25))
    nan_row = np.full(16, np.nan)
    assert clustering.assign(np.stack([near(ANN), nan_row]), [0.1, 0.5]) == [None, None]
    assert clustering.labels == []


def test_known_speakers_are_named_only_when_close_enough():
    clustering = OnlineClustering(ClusteringSettings(), known={"Ann": ANN})
    labels = clustering.assign(np.stack([near(ANN), near(CAL)]), [0.5, 0.5])
    assert labels == ["Ann", "SPEAKER_00"]
    assert clustering.labels == ["Ann", "SPEAKER_00"]


def test_spoken_labels_are_numbered_in_the_order_they_are_first_sent_with_no_gaps():
    from speaker_transcripts.live.clustering import SpokenLabels

    labels = SpokenLabels(["Ada"])
    assert [labels(label) for label in ["SPEAKER_02", "Ada", "SPEAKER_00", "SPEAKER_02", "SPEAKER_05"]] == [
        "SPEAKER_00", "Ada", "SPEAKER_01", "SPEAKER_00", "SPEAKER_02"]


def test_a_voice_whose_windows_each_fell_short_of_its_clip_takes_the_name_when_its_words_go_out():
    """Each window scores under ``NAMING_THRESHOLD`` against Ada's clip (so the voice founds SPEAKER_00), but the
    windows summed do reach it: its words go out as Ada's. A voice that is nobody's stays anonymous, numbered
    without a gap."""
    from speaker_transcripts.live.clustering import SpokenLabels
    from speaker_transcripts.pipeline.speaker_naming import NAMING_THRESHOLD

    a, b = 0.53, 0.97  # the voice along the first axis; the clip and each window a = 30 degrees off it, apart
    ada = np.array([np.cos(a), np.sin(a), 0.0, 0.0])
    windows = [np.array([np.cos(a), -np.sin(a) * np.cos(b), side * np.sin(a) * np.sin(b), 0.0]) for side in (1, -1)]
    assert all(window @ ada < NAMING_THRESHOLD for window in windows)
    clustering = OnlineClustering(ClusteringSettings(min_new_speech=0.1), {"Ada": ada})
    first = clustering.assign(np.stack([windows[0]]), [0.5])
    second = clustering.assign(np.stack([windows[1]]), [0.5])
    other = clustering.assign(np.stack([np.array([0.0, 0.0, 0.0, 1.0])]), [0.5])
    assert first == second == ["SPEAKER_00"] and other == ["SPEAKER_01"]
    labels = SpokenLabels(["Ada"], named=clustering.known_name)
    assert [labels("SPEAKER_01"), labels("SPEAKER_00")] == ["SPEAKER_00", "Ada"]



def test_a_voice_matched_without_learning_moves_no_centroid_and_founds_no_speaker():
    clustering = OnlineClustering(ClusteringSettings())
    clustering.assign(np.stack([near(ANN)]), [0.8])
    before = [total.copy() for total in clustering.sums]
    assert clustering.assign(np.stack([near(ANN), near(BEN)]), [0.8, 0.8], learn=False) == ["SPEAKER_00", None]
    assert clustering.labels == ["SPEAKER_00"]
    np.testing.assert_array_equal(clustering.sums[0], before[0])
