"""Naming diarized speakers after enrolment clips: one to one, above a threshold, else anonymous."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.pipeline.speaker_naming import (
    NAMING_THRESHOLD,
    NameMatch,
    match_names,
    speech_of,
    unmatched_warnings,
)


def voice(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_each_clip_names_the_speaker_it_matches():
    speakers = {"SPEAKER_00": voice(1, 0, 0), "SPEAKER_01": voice(0, 1, 0)}
    clips = {"Bob": voice(0.1, 2, 0), "Alice": voice(3, 0.2, 0)}
    assert match_names(speakers, clips) == [
        NameMatch("Bob", "SPEAKER_01", pytest.approx(0.9988, abs=1e-3)),
        NameMatch("Alice", "SPEAKER_00", pytest.approx(0.9978, abs=1e-3)),
    ]


def test_a_name_is_never_given_twice_and_the_assignment_is_global():
    """Alice is closest to both speakers, but Bob matches SPEAKER_00 only: a greedy choice
    per name would give Alice SPEAKER_00 and leave Bob without his speaker."""
    speakers = {"SPEAKER_00": voice(1, 0), "SPEAKER_01": voice(0.6, 0.8)}
    clips = {"Alice": voice(0.8, 0.6), "Bob": voice(1, 0.05)}
    given = {match.name: match.speaker for match in match_names(speakers, clips)}
    assert given == {"Alice": "SPEAKER_01", "Bob": "SPEAKER_00"}


def test_a_voice_absent_from_the_recording_names_nobody():
    speakers = {"SPEAKER_00": voice(1, 0, 0)}
    clips = {"Alice": voice(1, 0.1, 0), "Impostor": voice(0, 0, 1)}
    matches = match_names(speakers, clips)
    assert [match.speaker for match in matches] == ["SPEAKER_00", None]
    assert unmatched_warnings(matches) == [
        f"known speaker 'Impostor' matched no voice in this audio (closest similarity 0.00, {NAMING_THRESHOLD:g} needed)"
    ]


def test_below_the_threshold_even_the_best_pair_is_refused():
    speakers = {"SPEAKER_00": voice(1, 0)}
    almost = voice(np.cos(1.2), np.sin(1.2))  # cosine 0.36
    assert match_names(speakers, {"Alice": almost})[0].speaker is None
    assert match_names(speakers, {"Alice": almost}, threshold=0.3)[0].speaker == "SPEAKER_00"


def test_more_clips_than_speakers_and_no_speakers_at_all():
    clips = {"A": voice(1, 0), "B": voice(0, 1), "C": voice(1, 1)}
    matches = match_names({"SPEAKER_00": voice(0.1, 1)}, clips)
    assert [match.speaker for match in matches] == [None, "SPEAKER_00", None]
    assert match_names({}, clips) == [NameMatch("A", None, None), NameMatch("B", None, None), NameMatch("C", None, None)]
    assert unmatched_warnings([NameMatch("A", None, None)]) == ["known speaker 'A' matched no voice in this audio"]


def test_speech_of_keeps_only_the_speech_regions():
    samples = np.arange(10, dtype=np.float32)
    assert speech_of(samples, [(1, 3), (6, 8)]).tolist() == [1, 2, 6, 7]
    assert len(speech_of(samples, [])) == 0
