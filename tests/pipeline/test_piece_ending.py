"""End-of-text is taken away only right after an opening timestamp well before the piece's end."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from speaker_transcripts.pipeline.piece_ending import END_MARGIN_S, TIMESTAMP_S, FinishEachPiece

NO_TIMESTAMPS, END_OF_TEXT, TEXT = 50363, 50256, 400
FIRST_TIMESTAMP = NO_TIMESTAMPS + 1
PROMPT = [50257, 50362]  # start of transcript, a task token: before begin_index


def at(seconds: float) -> int:
    return FIRST_TIMESTAMP + round(seconds / TIMESTAMP_S)


def processor(*piece_seconds: float) -> FinishEachPiece:
    finishing = FinishEachPiece(SimpleNamespace(no_timestamps_token_id=NO_TIMESTAMPS, eos_token_id=END_OF_TEXT))
    finishing.set_begin_index(len(PROMPT))
    finishing.piece_seconds = list(piece_seconds)
    return finishing


def allowed_to_end(finishing: FinishEachPiece, *rows: list[int]) -> list[bool]:
    input_ids = torch.tensor([PROMPT + row for row in rows])
    scores = finishing(input_ids, torch.zeros(len(rows), FIRST_TIMESTAMP + 1500))
    return [bool(score) for score in torch.isfinite(scores[:, END_OF_TEXT])]


def test_an_opening_timestamp_well_before_the_end_may_not_end_the_text():
    opened_early = [at(0), TEXT, at(27.0), at(27.0)]  # the next segment opened 2.4 s before the end
    opened_at_the_end = [at(0), TEXT, at(29.2), at(29.2)]  # within END_MARGIN_S of it
    closed = [at(0), TEXT, TEXT, at(27.0)]  # a segment just closed: Whisper may end there
    in_text = [at(0), TEXT, TEXT, TEXT]
    assert 29.4 - 29.2 < END_MARGIN_S < 29.4 - 27.0
    finishing = processor(29.4, 29.4, 29.4, 29.4)
    assert allowed_to_end(finishing, opened_early, opened_at_the_end, closed, in_text) == [False, True, True, True]


def test_the_first_timestamp_is_an_opening_one_and_each_row_has_its_own_piece():
    rows = [[at(5.0)], [at(5.0)]]
    assert allowed_to_end(processor(30.0, 5.2), *rows) == [False, True]


def test_beams_follow_their_piece_and_rows_that_match_no_piece_are_left_alone():
    beams = [[at(0), TEXT, at(3.0), at(3.0)]] * 4  # two pieces, two beams each
    assert allowed_to_end(processor(20.0, 3.1), *beams) == [False, False, True, True]
    assert allowed_to_end(processor(20.0, 20.0, 20.0), *beams) == [True] * 4  # 4 rows, 3 pieces: not ours to judge
    assert allowed_to_end(processor(), *beams) == [True] * 4
