"""The live work a server takes on when left to choose: by how fast Whisper's encoder runs."""

from __future__ import annotations

import pytest

from speaker_transcripts.live.capacity import FAST_ENCODER, SLOW_ENCODER, LiveCapacity, live_capacity


def test_a_fast_encoder_takes_two_sessions_and_the_lookahead_a_slow_one_a_session_without():
    assert live_capacity(fast_encoder=True) == LiveCapacity(max_sessions=2, lookahead_s=3.0) == FAST_ENCODER
    assert live_capacity(fast_encoder=False) == LiveCapacity(max_sessions=1, lookahead_s=0.0) == SLOW_ENCODER


@pytest.mark.parametrize("fast_encoder", [True, False])
def test_a_value_set_is_used_as_it_is_and_only_the_other_is_chosen(fast_encoder):
    chosen = live_capacity(fast_encoder)
    assert live_capacity(fast_encoder, max_sessions=0) == LiveCapacity(0, chosen.lookahead_s)
    assert live_capacity(fast_encoder, max_sessions=5, lookahead_s=0.0) == LiveCapacity(5, 0.0)
    assert live_capacity(fast_encoder, lookahead_s=10.0) == LiveCapacity(chosen.max_sessions, 10.0)


def test_room_for_two_sessions_with_speakers_holds_three_text_only_and_not_a_third_with_speakers():
    from speaker_transcripts.live.capacity import session_cost

    room = LiveCapacity(max_sessions=2, lookahead_s=0.0).budget
    assert 3 * session_cost(diarize=False) <= room < 4 * session_cost(diarize=False)
    assert 2 * session_cost(diarize=True) <= room < 3 * session_cost(diarize=True)
    assert session_cost(diarize=True) + 2 * session_cost(diarize=False) > room
    assert LiveCapacity(max_sessions=1, lookahead_s=0.0).budget < 2 * session_cost(diarize=False)  # one session, as before
