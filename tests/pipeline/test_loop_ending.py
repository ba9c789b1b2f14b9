"""A row whose text tokens end in a loop may only end; other rows, and loops of timestamps, are left alone."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from speaker_transcripts.pipeline.loop_ending import MIN_LOOP_TOKENS, EndLoops

END_OF_TEXT, TIMESTAMP = 50256, 50364
PROMPT = [50257, 50362]  # start of transcript, a task token: before begin_index
MORNING, FULL_STOP, OTHER = 3329, 13, 400


def choices(*rows: list[int]) -> list[torch.Tensor]:
    ending = EndLoops(SimpleNamespace(eos_token_id=END_OF_TEXT))
    ending.set_begin_index(len(PROMPT))
    scores = ending(torch.tensor([PROMPT + row for row in rows]), torch.zeros(len(rows), TIMESTAMP + 1500))
    return [torch.isfinite(row).nonzero().flatten() for row in scores]


def test_a_looping_row_may_only_end_the_others_keep_every_choice():
    looping = [TIMESTAMP, OTHER, *[MORNING, FULL_STOP] * 4]  # "Morning." four times: six tokens after the first
    saying = [TIMESTAMP, OTHER, OTHER, OTHER, *[MORNING, FULL_STOP] * 3]  # three times: still speech
    ended, going = choices(looping, saying)
    assert ended.tolist() == [END_OF_TEXT] and len(going) == TIMESTAMP + 1500
    assert 2 * 3 >= MIN_LOOP_TOKENS


def test_timestamps_between_the_copies_do_not_hide_a_loop_and_a_short_word_needs_more_copies():
    with_timestamps = [TIMESTAMP, MORNING, TIMESTAMP + 50, TIMESTAMP + 50, MORNING, TIMESTAMP + 90, TIMESTAMP + 90, *[MORNING] * 5]
    assert choices(with_timestamps)[0].tolist() == [END_OF_TEXT]
    assert len(choices([OTHER] * 6)[0]) > 1  # five copies after the first: under MIN_LOOP_TOKENS
