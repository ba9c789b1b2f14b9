"""When the speaker count is questioned (pipeline/speaker_count.py): pure logic, no models."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.pipeline.diarization import Turn
from speaker_transcripts.pipeline.speaker_count import CLOSE_VOICES, ONE_VOICE_SPREAD, SHORT_SPEECH_S, closest_pair, count_doubts


def voice(angle_deg: float) -> np.ndarray:
    """A unit vector at ``angle_deg`` from the first axis: cosine distance 1 - cos(angle) apart."""
    angle = np.radians(angle_deg)
    return np.array([np.cos(angle), np.sin(angle), 0.0], dtype=np.float32)


def test_one_voice_in_a_short_recording_is_questioned_and_in_a_long_one_or_a_blip_not():
    short = [Turn("SPEAKER_00", 0.0, 12.0), Turn("SPEAKER_00", 13.0, 25.0)]
    (doubt,) = count_doubts(short, {"SPEAKER_00": voice(0)})
    assert "all 24 s of speech to one voice" in doubt and "num_speakers" in doubt
    long = [Turn("SPEAKER_00", 0.0, SHORT_SPEECH_S + 1.0)]
    assert count_doubts(long, {"SPEAKER_00": voice(0)}) == []
    assert count_doubts([Turn("SPEAKER_00", 0.0, 0.5)], {}) == [], "half a second: nothing to question"


def test_one_voice_whose_phrases_sound_alike_is_one_person_and_not_questioned():
    """The phrase check's spread of the one voice: close halves are one person talking alone; far ones, or
    none known (too few phrases, or no check), leave the doubt."""
    short = [Turn("SPEAKER_00", 0.0, 24.0)]
    assert count_doubts(short, {"SPEAKER_00": voice(0)}, spread=ONE_VOICE_SPREAD - 0.1) == []
    assert len(count_doubts(short, {"SPEAKER_00": voice(0)}, spread=ONE_VOICE_SPREAD + 0.1)) == 1
    assert len(count_doubts(short, {"SPEAKER_00": voice(0)}, spread=None)) == 1


def test_two_voices_close_together_are_named_and_far_apart_are_not():
    turns = [Turn("SPEAKER_00", 0.0, 40.0), Turn("Ana", 40.0, 80.0), Turn("SPEAKER_02", 80.0, 120.0)]
    near = np.degrees(np.arccos(1.0 - (CLOSE_VOICES - 0.05)))  # just inside the doubt
    (doubt,) = count_doubts(turns, {"SPEAKER_00": voice(0), "Ana": voice(120), "SPEAKER_02": voice(120 + near)})
    assert doubt.startswith("Ana and SPEAKER_02 sound alike")
    apart = {"SPEAKER_00": voice(0), "Ana": voice(90), "SPEAKER_02": voice(180)}
    assert count_doubts(turns, apart) == []


def test_a_speaker_without_a_voice_vector_is_not_compared():
    """pyannote pads the centroids of speakers it could not embed with zeros."""
    centroids = {"A": voice(0), "B": np.zeros(3, dtype=np.float32), "C": voice(100)}
    assert closest_pair(centroids) == ("A", "C", pytest.approx(1.0 - np.cos(np.radians(100)), abs=1e-6))
    assert closest_pair({"A": voice(0)}) is None
