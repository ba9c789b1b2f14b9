"""The ASR<->speaker merge on hand-built turns, and reading pyannote's outputs."""

from __future__ import annotations

import re
from itertools import pairwise
from types import SimpleNamespace

import pytest
from pyannote.core import Annotation, Segment

from diarization_utils import (
    UNKNOWN_SPEAKER,
    Turn,
    assign_speakers,
    speaker_for,
    turns_from_output,
)
from transcript import Chunk

A1, B1, A2 = Turn("A", 0.0, 4.0), Turn("B", 4.0, 8.0), Turn("A", 8.0, 12.0)


def words(*spans):
    return [Chunk(f" w{index}", start, end) for index, (start, end) in enumerate(spans)]


def squash(text):
    return re.sub(r"\s+", "", text)


def assert_nothing_lost(chunks, segments):
    assert squash("".join(s.text for s in segments)) == squash("".join(c.text for c in chunks))


def test_chunks_go_to_the_speaker_they_overlap_most():
    chunks = words((0.0, 3.0), (3.5, 6.0), (6.5, 11.0))
    segments = assign_speakers(chunks, [A1, B1, A2])
    assert [(s.speaker, s.text) for s in segments] == [("A", "w0"), ("B", "w1"), ("A", "w2")]


def test_boundary_chunk_goes_to_the_majority_speaker():
    # 1.0 s of A against 3.9 s of B; and 3.0 s of A against 0.5 s of B.
    assert speaker_for(3.0, 7.9, [A1, B1, A2]) == "B"
    assert speaker_for(1.0, 4.5, [A1, B1, A2]) == "A"


def test_word_level_chunks_split_exactly_at_the_speaker_change():
    chunks = words((3.0, 3.5), (3.6, 3.9), (4.1, 4.4), (4.5, 5.0))
    segments = assign_speakers(chunks, [A1, B1])
    assert [(s.speaker, s.text, s.start, s.end) for s in segments] == [("A", "w0 w1", 3.0, 3.9), ("B", "w2 w3", 4.1, 5.0)]


def test_consecutive_chunks_of_one_speaker_are_joined():
    chunks = words((0.0, 1.0), (1.0, 2.0), (2.0, 3.0))
    segments = assign_speakers(chunks, [A1])
    assert len(segments) == 1 and segments[0].text == "w0 w1 w2" and (segments[0].start, segments[0].end) == (0.0, 3.0)


def test_text_in_a_gap_goes_to_the_nearest_speaker():
    turns = [Turn("A", 0.0, 2.0), Turn("B", 6.0, 8.0)]
    assert speaker_for(2.5, 3.0, turns) == "A"
    assert speaker_for(5.0, 5.5, turns) == "B"


def test_text_after_the_last_turn_is_kept_not_dropped():
    chunks = words((0.0, 3.0), (4.0, 7.0), (12.5, 14.0), (14.0, 15.0))
    segments = assign_speakers(chunks, [A1, B1, A2])
    assert segments[-1].speaker == "A" and segments[-1].text == "w2 w3"
    assert_nothing_lost(chunks, segments)


def test_text_before_the_first_turn_is_kept():
    segments = assign_speakers(words((0.0, 0.5), (2.0, 3.0)), [Turn("B", 1.0, 3.0)])
    assert [(s.speaker, s.text) for s in segments] == [("B", "w0 w1")]


def test_overlapping_turns_are_resolved_deterministically():
    overlapping = [Turn("A", 0.0, 5.0), Turn("B", 3.0, 8.0)]
    assert speaker_for(3.0, 5.0, overlapping) == "A"  # equal overlap: the earlier-starting speaker
    assert speaker_for(3.0, 5.0, list(reversed(overlapping))) == "A"
    assert speaker_for(4.0, 7.0, overlapping) == "B"


def test_equal_overlap_equal_start_breaks_ties_by_label():
    assert speaker_for(0.0, 1.0, [Turn("SPEAKER_01", 0, 2), Turn("SPEAKER_00", 0, 2)]) == "SPEAKER_00"


def test_zero_length_chunk_inside_a_turn():
    assert speaker_for(5.0, 5.0, [A1, B1, A2]) == "B"


def test_no_turns_keeps_text_under_unknown():
    chunks = words((0.0, 1.0), (1.0, 2.0))
    segments = assign_speakers(chunks, [])
    assert [(s.speaker, s.text) for s in segments] == [(UNKNOWN_SPEAKER, "w0 w1")]


def test_no_speech_gives_no_segments():
    assert assign_speakers([], [A1]) == []
    assert assign_speakers([Chunk("  ", 0.0, 1.0)], [A1]) == []


def test_blank_chunks_do_not_split_a_speaker():
    chunks = [Chunk(" one", 0.0, 1.0), Chunk(" ", 5.0, 5.5), Chunk(" two", 1.0, 2.0)]
    assert [(s.speaker, s.text) for s in assign_speakers(chunks, [A1, B1])] == [("A", "one two")]


def test_every_word_kept_once_on_a_busy_conversation():
    turns = [Turn("A" if i % 2 else "B", i * 0.7, i * 0.7 + 1.0) for i in range(40)]  # overlapping turns
    chunks = words(*[(i * 0.3, i * 0.3 + 0.25) for i in range(100)])
    segments = assign_speakers(chunks, turns)
    assert_nothing_lost(chunks, segments)
    assert all(s.start <= s.end for s in segments)
    assert all(a.speaker != b.speaker for a, b in pairwise(segments))


def _annotation():
    annotation = Annotation()
    annotation[Segment(4.0, 8.0)] = "SPEAKER_01"
    annotation[Segment(0.0, 4.5)] = "SPEAKER_00"
    return annotation


def test_turns_from_annotation_sorted_by_time():
    assert turns_from_output(_annotation()) == [Turn("SPEAKER_00", 0.0, 4.5), Turn("SPEAKER_01", 4.0, 8.0)]


def test_turns_from_diarize_output_prefer_exclusive():
    exclusive = Annotation()
    exclusive[Segment(0.0, 4.0)] = "SPEAKER_00"
    output = SimpleNamespace(speaker_diarization=_annotation(), exclusive_speaker_diarization=exclusive)
    assert turns_from_output(output) == [Turn("SPEAKER_00", 0.0, 4.0)]
    assert turns_from_output(SimpleNamespace(speaker_diarization=_annotation()))[1].speaker == "SPEAKER_01"


def test_unexpected_pipeline_output_is_named():
    with pytest.raises(TypeError, match="expected a pyannote Annotation"):
        turns_from_output([("A", 0, 1)])
