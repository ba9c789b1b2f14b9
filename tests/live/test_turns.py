"""Turn boundaries from window probabilities, by OpenAI's server_vad rules."""

from speaker_transcripts.live.turns import END_PAD_MS, TurnBoundary, TurnDetection, TurnDetector

WINDOW = 512
RATE = 16000


def detector(**settings) -> TurnDetector:
    return TurnDetector(TurnDetection(**settings), WINDOW, RATE)


def test_a_turn_starts_backdated_and_stops_after_the_silence():
    turns = detector(prefix_padding_ms=300, silence_duration_ms=500)
    probabilities = [0.0] * 40 + [0.9] * 30 + [0.0] * 20
    boundaries = turns.feed(probabilities)
    assert boundaries[0] == TurnBoundary(True, 40 * WINDOW - 300 * RATE // 1000)
    assert boundaries[1].started is False
    assert boundaries[1].sample == 70 * WINDOW + END_PAD_MS * RATE // 1000
    assert len(boundaries) == 2


def test_a_click_starts_no_turn_and_a_short_pause_ends_none():
    turns = detector(silence_duration_ms=500)
    assert turns.feed([0.0] * 10 + [0.9] * 2 + [0.0] * 30) == []
    boundaries = turns.feed([0.9] * 20 + [0.1] * 8 + [0.9] * 20)  # 0.26 s of pause
    assert [boundary.started for boundary in boundaries] == [True]


def test_the_same_probabilities_fed_in_pieces_give_the_same_turns():
    probabilities = ([0.0] * 15 + [0.8] * 25 + [0.0] * 25) * 3
    whole = detector().feed(probabilities)
    pieces = detector()
    fed = [boundary for start in range(0, len(probabilities), 7) for boundary in pieces.feed(probabilities[start : start + 7])]
    assert fed == whole and len(whole) == 6


def test_a_turn_never_starts_before_the_last_one_stopped():
    turns = detector(prefix_padding_ms=2000, silence_duration_ms=200)
    boundaries = turns.feed([0.9] * 20 + [0.0] * 10 + [0.9] * 10)
    stop, restart = boundaries[1], boundaries[2]
    assert restart.started and restart.sample >= stop.sample
