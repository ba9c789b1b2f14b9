"""Closing Whisper's open timestamps: every time a number inside the audio."""

from __future__ import annotations

from transcript import Chunk, close_timestamps, joined_text


def raw(*spans):
    return [{"text": f" w{index}", "timestamp": span} for index, span in enumerate(spans)]


def test_open_last_end_is_closed_with_the_audio_duration():
    chunks = close_timestamps(raw((0.0, 2.0), (2.0, None)), duration=5.25)
    assert [(c.start, c.end) for c in chunks] == [(0.0, 2.0), (2.0, 5.25)]


def test_open_end_in_the_middle_takes_the_next_start():
    chunks = close_timestamps(raw((0.0, None), (3.0, 4.0)), duration=10)
    assert [(c.start, c.end) for c in chunks] == [(0.0, 3.0), (3.0, 4.0)]


def test_missing_start_takes_the_previous_end():
    chunks = close_timestamps(raw((0.0, 1.5), (None, 2.5)), duration=10)
    assert chunks[1].start == 1.5


def test_times_are_clamped_into_the_audio_and_never_reversed():
    chunks = close_timestamps(raw((-1.0, 40.0), (4.0, 3.0)), duration=30)
    assert [(c.start, c.end) for c in chunks] == [(0.0, 30.0), (4.0, 4.0)]


def test_rounding_to_whisper_precision():
    assert close_timestamps(raw((0.1 + 0.2, 1.0000001)), duration=2)[0] == Chunk(" w0", 0.3, 1.0)


def test_no_none_anywhere_for_many_open_ends():
    chunks = close_timestamps(raw((None, None), (None, None), (1.0, None)), duration=3)
    assert all(isinstance(value, float) for c in chunks for value in (c.start, c.end))
    assert chunks[-1].end == 3


def test_joined_text_keeps_whisper_spacing():
    assert joined_text([Chunk(" Hello", 0, 1), Chunk(" world.", 1, 2)]) == "Hello world."
