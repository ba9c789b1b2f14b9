"""Speech-aligned pieces: packed at pauses, never longer than a window, never overlapping."""

from __future__ import annotations

import pytest

from speaker_transcripts.pipeline.long_form import TAIL_S, Piece, on_file_clock, plan_pieces

RATE = 100  # samples per second: keeps the arithmetic readable


def seconds(*spans: tuple[float, float]) -> list[tuple[int, int]]:
    return [(int(start * RATE), int(end * RATE)) for start, end in spans]


def test_neighbours_join_until_the_window_is_full_and_cuts_fall_in_pauses():
    speech = seconds((1, 10), (11, 20), (21, 29), (31, 40), (45, 50))
    pieces = plan_pieces(speech, total=60 * RATE, max_samples=30 * RATE, pad=RATE // 5)
    assert [(p.start / RATE, p.end / RATE) for p in pieces] == [(0.8, 29.2), (30.8, 50.2)]


def test_padding_stops_halfway_into_a_short_pause_and_pieces_never_overlap():
    speech = seconds((0.0, 29.0), (29.1, 40.0))
    pieces = plan_pieces(speech, total=40 * RATE, max_samples=30 * RATE, pad=RATE // 5)
    assert pieces[0].end <= pieces[1].start
    assert pieces[0].start == 0 and pieces[1].end == 40 * RATE


def test_speech_longer_than_a_window_is_cut_into_equal_parts():
    pieces = plan_pieces(seconds((0, 70)), total=70 * RATE, max_samples=30 * RATE, pad=RATE // 5)
    lengths = [(p.end - p.start) / RATE for p in pieces]
    assert len(pieces) == 3 and all(length <= 30 for length in lengths)
    assert pieces[0].start == 0 and pieces[-1].end == 70 * RATE


def test_every_speech_sample_is_in_exactly_one_piece_and_no_piece_outgrows_the_window():
    speech = seconds(*[(start, start + length) for start, length in [(0.5, 3), (4, 12), (17, 0.3), (18, 29.5), (48, 2), (51, 9)]])
    pieces = plan_pieces(speech, total=61 * RATE, max_samples=30 * RATE, pad=RATE // 5)
    for start, end in speech:
        for sample in range(start, end):
            assert sum(piece.start <= sample < piece.end for piece in pieces) == 1
    assert all(piece.end - piece.start <= 30 * RATE for piece in pieces)


def test_no_speech_no_pieces_and_impossible_padding_is_refused():
    assert plan_pieces([], total=1000, max_samples=3000, pad=20) == []
    with pytest.raises(ValueError, match="no room"):
        plan_pieces(seconds((0, 1)), total=1000, max_samples=40, pad=20)


def test_chunks_go_on_the_file_clock_and_text_in_whispers_padding_is_dropped():
    piece = Piece(start=10 * RATE, end=25 * RATE)  # 15 s long
    raw = [
        {"text": " Unplaced", "timestamp": (None, 0.4)},  # no start: the piece's start
        {"text": " Hello.", "timestamp": (0.5, 2.0)},
        {"text": " Open", "timestamp": (3.0, None)},
        {"text": " Past", "timestamp": (14.0, 16.0)},
        {"text": " you", "timestamp": (15.0 - TAIL_S, 17.0)},  # written into Whisper's own padding
    ]
    placed = on_file_clock(raw, piece, RATE)
    assert [(c["text"], c["timestamp"]) for c in placed] == [
        (" Unplaced", (10.0, 10.4)), (" Hello.", (10.5, 12.0)), (" Open", (13.0, 25.0)), (" Past", (24.0, 25.0)),
    ]
