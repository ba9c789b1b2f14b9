"""Where a live turn's buffer is cut so that its words are final while the turn goes on: pure rules."""

from __future__ import annotations

from speaker_transcripts.live.cuts import FORCE_TRIM_S, MIN_STRETCH_S, Cut, cut_point
from speaker_transcripts.pipeline.transcript import Chunk


def words(*texts: str, start: float = 0.0, step: float = 0.4) -> list[Chunk]:
    return [Chunk(f" {text}", start + index * step, start + index * step + 0.3) for index, text in enumerate(texts)]


def test_a_turn_that_runs_on_is_cut_at_its_last_sentence_end():
    said = words("We", "should", "ship.", "Then", "we", "test", "it.", "And")
    assert cut_point(said, None, 0.0, 4.0) == Cut(said[6].end, closes=True)


def test_a_stretch_shorter_than_the_shortest_is_not_cut_off_alone():
    said = words("Yes.", "And", "then")
    assert said[0].end < MIN_STRETCH_S and cut_point(said, None, 0.0, 2.0) is None


def test_a_speaker_change_on_the_final_timeline_closes_a_segment_at_the_last_word_before_it():
    said = words("so", "that", "is", "it", "right", "okay", "good")
    speakers = ["A", "A", "A", "A", "B", "B", ""]
    assert cut_point(said, speakers, 0.0, 4.0, horizon=said[5].end) == Cut(said[3].end, closes=True)


def test_a_change_the_timeline_does_not_cover_yet_is_not_cut():
    said = words("so", "that", "is", "it", "right")
    speakers = ["A", "A", "A", "A", "B"]
    assert cut_point(said, speakers, 0.0, 4.0, horizon=said[3].end) is None


def test_words_before_the_buffer_do_not_count():
    said = words("Done.", "and", "so", "on", "we", "go")
    assert cut_point(said, None, said[0].end, 4.0) is None


def test_a_buffer_without_a_sentence_end_is_cut_mid_sentence_only_past_force_trim():
    said = words(*["word"] * 60, step=0.45)
    assert cut_point(said, None, 0.0, FORCE_TRIM_S - 1) is None
    assert cut_point(said, None, 0.0, FORCE_TRIM_S + 1) == Cut(said[-1].end, closes=False)
