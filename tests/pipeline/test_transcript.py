"""Closing Whisper's open timestamps: every time a number inside the audio."""

from __future__ import annotations

import pytest

from speaker_transcripts.pipeline.transcript import (
    MAX_SEGMENT_S,
    Chunk,
    close_timestamps,
    ends_sentence,
    group_words,
    joined_text,
    segment_ranges,
)


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


def words(*spec: tuple[str, float, float]) -> list[Chunk]:
    return [Chunk(text, start, end) for text, start, end in spec]


def test_group_words_breaks_at_sentence_ends_and_pauses():
    grouped = group_words(words(
        (" Hello", 0.0, 0.4), (" there.", 0.4, 0.9), (" How", 1.0, 1.2), (" are", 1.2, 1.4), (" you", 1.4, 1.6),
        (" today", 3.0, 3.4),  # 1.4 s pause: a new segment
    ))
    assert grouped == [Chunk("Hello there.", 0.0, 0.9), Chunk("How are you", 1.0, 1.6), Chunk("today", 3.0, 3.4)]


def test_group_words_caps_segment_length_and_keeps_every_word():
    many = [Chunk(f" w{i}", i * 0.5, i * 0.5 + 0.4) for i in range(200)]  # 100 s without punctuation
    grouped = group_words(many)
    assert all(segment.end - segment.start <= MAX_SEGMENT_S for segment in grouped)
    assert " ".join(segment.text for segment in grouped).split() == [f"w{i}" for i in range(200)]
    assert group_words([]) == []


@pytest.mark.parametrize(
    ("text", "ends"),
    [("meters.", True), ("what?", True), ("No.", True), ("in 1999.", True), ("go.", True), ("And Mr.", False),
     ("Dr.", False), ("J.", False), ("U.S.", False), ("e.g.", False), ("z.B.", False), ("Mme.", False), ("word", False)],
)
def test_titles_abbreviations_and_initials_end_no_sentence(text, ends):
    assert ends_sentence(text) is ends


def test_and_mr_john_dashwood_stays_one_segment():
    words = [Chunk(text, index * 0.3, index * 0.3 + 0.25) for index, text in enumerate(["", "And", "Mr.", "John", "Dashwood", "had"][1:])]
    assert [len(span) for span in segment_ranges(words)] == [5]
