"""When the speaker count is questioned (pipeline/speaker_count.py): pure logic, no models."""

from __future__ import annotations

from speaker_transcripts.pipeline.diarization import Turn
from speaker_transcripts.pipeline.speaker_count import ONE_VOICE_SPREAD, SHORT_SPEECH_S, count_doubts


def test_one_voice_in_a_short_recording_is_questioned_and_in_a_long_one_or_a_blip_not():
    two_halves = ONE_VOICE_SPREAD + 0.1
    short = [Turn("SPEAKER_00", 0.0, 12.0), Turn("SPEAKER_00", 13.0, 25.0)]
    (doubt,) = count_doubts(short, spread=two_halves)
    assert "all 24 s of speech to one voice" in doubt and "num_speakers" in doubt
    long = [Turn("SPEAKER_00", 0.0, SHORT_SPEECH_S + 1.0)]
    assert count_doubts(long, spread=two_halves) == []
    assert count_doubts([Turn("SPEAKER_00", 0.0, 0.5)], spread=two_halves) == [], "half a second: nothing to question"


def test_only_one_voice_whose_phrases_sound_like_two_people_is_questioned():
    """The phrase check's spread of the one voice: far halves say a second voice is likely; close ones are one
    person talking alone; none known (too few phrases, as in dictation or a 1-s memo, or no check) is no evidence."""
    short = [Turn("SPEAKER_00", 0.0, 24.0)]
    assert count_doubts(short, spread=ONE_VOICE_SPREAD - 0.1) == []
    assert len(count_doubts(short, spread=ONE_VOICE_SPREAD + 0.1)) == 1
    assert count_doubts(short, spread=None) == []
    assert count_doubts([Turn("SPEAKER_00", 0.0, 1.2)]) == [], "a 1-s voice memo: too few phrases to doubt"


def test_several_voices_are_not_questioned_however_close_they_sound():
    """Close centroids told nothing about the count (docs/quality.md): a right count's two voices lay as close
    as 0.09, so two or more voices found in a short recording raise no warning."""
    turns = [Turn("SPEAKER_00", 0.0, 10.0), Turn("Ana", 10.0, 20.0), Turn("SPEAKER_02", 20.0, 25.0)]
    assert count_doubts(turns) == []
    assert count_doubts(turns, spread=ONE_VOICE_SPREAD + 0.3) == []
