"""Speech-aligned pieces: speech packed back to back, pauses shortened to the context either side,
never longer than a window, never overlapping, and times back on the file's clock."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.pipeline.long_form import TAIL_S, Piece, on_file_clock, plan_pieces

RATE = 100  # samples per second: keeps the arithmetic readable


def seconds(*spans: tuple[float, float]) -> list[tuple[int, int]]:
    return [(int(start * RATE), int(end * RATE)) for start, end in spans]


def spans(piece: Piece) -> list[tuple[float, float]]:
    return [(start / RATE, end / RATE) for start, end in piece.spans]


def test_neighbours_join_back_to_back_until_the_window_is_full_and_cuts_fall_in_pauses():
    speech = seconds((1, 10), (11, 20), (21, 29), (31, 40), (45, 50))
    pieces = plan_pieces(speech, total=60 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=2 * RATE // 5)
    assert [spans(piece) for piece in pieces] == [
        [(0.8, 10.2), (10.8, 20.2), (20.8, 29.2)],  # each pause shortened to 0.2 s of context either side
        [(30.8, 40.2), (44.8, 50.2)],
    ]
    assert [piece.length / RATE for piece in pieces] == [27.2, 14.8]


def test_pauses_cut_out_let_a_window_hold_more_speech_than_its_span():
    speech = seconds((0, 9), (19, 28), (38, 47))  # 27 s of speech across 47 s
    (piece,) = plan_pieces(speech, total=50 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=2 * RATE // 5)
    assert spans(piece) == [(0.0, 9.2), (18.8, 28.2), (37.8, 47.2)]
    assert piece.length <= 30 * RATE


def test_context_that_meets_makes_one_span():
    speech = seconds((1, 5), (5.3, 9))  # a 0.3-s pause: shorter than the context either side
    (piece,) = plan_pieces(speech, total=10 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=2 * RATE // 5)
    assert spans(piece) == [(0.8, 9.2)]


def test_padding_stops_halfway_into_a_short_pause_and_pieces_never_overlap():
    speech = seconds((0.0, 29.0), (29.1, 40.0))
    pieces = plan_pieces(speech, total=40 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=2 * RATE // 5)
    assert pieces[0].end <= pieces[1].start
    assert pieces[0].start == 0 and pieces[1].end == 40 * RATE


def test_speech_longer_than_a_window_is_cut_into_equal_parts():
    pieces = plan_pieces(seconds((0, 70)), total=70 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=2 * RATE // 5)
    lengths = [p.length / RATE for p in pieces]
    assert len(pieces) == 3 and all(length <= 30 for length in lengths)
    assert pieces[0].start == 0 and pieces[-1].end == 70 * RATE


def test_every_speech_sample_is_in_exactly_one_piece_and_no_piece_outgrows_the_window():
    speech = seconds(*[(start, start + length) for start, length in [(0.5, 3), (4, 12), (17, 0.3), (18, 29.5), (48, 2), (51, 9)]])
    pieces = plan_pieces(speech, total=61 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=2 * RATE // 5)
    for start, end in speech:
        for sample in range(start, end):
            assert sum(a <= sample < b for piece in pieces for a, b in piece.spans) == 1
    assert all(piece.length <= 30 * RATE for piece in pieces)


def test_no_speech_no_pieces_and_impossible_padding_is_refused():
    assert plan_pieces([], total=1000, max_samples=3000, pad=20, max_pause=40) == []
    with pytest.raises(ValueError, match="no room"):
        plan_pieces(seconds((0, 1)), total=1000, max_samples=40, pad=20, max_pause=40)


def test_chunks_go_on_the_file_clock_and_text_in_whispers_padding_is_dropped():
    piece = Piece(spans=((10 * RATE, 25 * RATE),))  # 15 s long
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


def test_times_in_a_piece_of_several_spans_go_back_span_by_span():
    piece = Piece(spans=((10 * RATE, 15 * RATE), (40 * RATE, 50 * RATE)))  # 15 s: 5 s, then 10 s from 40 s on
    raw = [
        {"text": " Before", "timestamp": (1.0, 4.0)},
        {"text": " seam", "timestamp": (5.0, 7.0)},  # starts where the spans meet: the later span's start
        {"text": " ended", "timestamp": (2.0, 5.0)},  # ends where they meet: the earlier span's end
        {"text": " after", "timestamp": (8.0, None)},
    ]
    placed = on_file_clock(raw, piece, RATE)
    assert [c["timestamp"] for c in placed] == [(11.0, 14.0), (40.0, 42.0), (12.0, 15.0), (43.0, 50.0)]
    assert piece.audio(np.arange(60 * RATE)).tolist() == [*range(10 * RATE, 15 * RATE), *range(40 * RATE, 50 * RATE)]


def test_a_chunk_across_a_cut_spans_the_pause_unless_the_pause_cut_out_is_longer_than_the_chunk():
    piece = Piece(spans=((0, 5 * RATE), (6 * RATE, 10 * RATE), (40 * RATE, 50 * RATE)))  # cuts of 1 s and 30 s
    raw = [
        {"text": " a sentence with a pause", "timestamp": (3.0, 7.0)},  # 4 s across a 1-s cut: both ends kept
        {"text": " slipped", "timestamp": (7.5, 10.0)},  # 1 s past a 30-s cut: stays where most of it is
        {"text": " late", "timestamp": (8.5, 10.5)},  # 0.5 s before the cut, 1.5 s after: the later span
    ]
    assert [c["timestamp"] for c in on_file_clock(raw, piece, RATE)] == [(3.0, 8.0), (8.5, 10.0), (40.0, 41.5)]


def test_a_pause_up_to_max_pause_is_kept_whole_and_a_longer_one_cut_to_it():
    speech = seconds((1, 5), (5.8, 9), (12, 15))  # pauses of 0.8 s and 3 s
    (piece,) = plan_pieces(speech, total=20 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=RATE)
    assert spans(piece) == [(0.8, 9.5), (11.5, 15.2)]  # the 3-s pause keeps 0.5 s either side
    with pytest.raises(ValueError, match="context either side"):
        plan_pieces(speech, total=20 * RATE, max_samples=30 * RATE, pad=RATE // 5, max_pause=RATE // 5)
