"""Where a live turn's buffer is cut so that its words are final while the turn goes on: pure rules."""

from __future__ import annotations

from speaker_transcripts.live.cuts import CLAUSE_S, MIN_STRETCH_S, RUN_ON_S, cut_point
from speaker_transcripts.pipeline.transcript import Chunk


def words(*texts: str, start: float = 0.0, step: float = 0.4) -> list[Chunk]:
    return [Chunk(f" {text}", start + index * step, start + index * step + 0.3) for index, text in enumerate(texts)]


def test_a_turn_that_runs_on_is_cut_at_its_last_sentence_end():
    said = words("We", "should", "ship.", "Then", "we", "test", "it.", "And")
    assert cut_point(said, None, 0.0, 4.0) == said[6].end


def test_a_stretch_shorter_than_the_shortest_is_not_cut_off_alone():
    said = words("Yes.", "And", "then")
    assert said[0].end < MIN_STRETCH_S and cut_point(said, None, 0.0, 2.0) is None


def test_a_speaker_change_on_the_final_timeline_closes_a_segment_at_the_last_word_before_it():
    said = words("so", "that", "is", "it", "right", "okay", "good")
    speakers = ["A", "A", "A", "A", "B", "B", ""]
    assert cut_point(said, speakers, 0.0, 4.0, horizon=said[5].end) == said[3].end


def test_a_change_the_timeline_does_not_cover_yet_is_not_cut():
    said = words("so", "that", "is", "it", "right")
    speakers = ["A", "A", "A", "A", "B"]
    assert cut_point(said, speakers, 0.0, 4.0, horizon=said[3].end) is None


def test_words_before_the_buffer_do_not_count():
    said = words("Done.", "and", "so", "on", "we", "go")
    assert cut_point(said, None, said[0].end, 4.0) is None


def test_a_run_on_buffer_without_a_clause_end_or_a_pause_is_cut_at_its_last_word_sent():
    said = words(*["word"] * 60, step=0.45)
    assert cut_point(said, None, 0.0, RUN_ON_S - 1) is None
    assert cut_point(said, None, 0.0, RUN_ON_S + 1) == said[-1].end


def test_a_buffer_without_a_sentence_end_is_cut_at_a_clause_end_or_else_at_a_pause_once_it_is_long():
    said = words("so", "we", "looked,", "and", "then", "the", "remote", "went", "on", step=0.7)
    assert cut_point(said, None, 0.0, CLAUSE_S - 0.5) is None
    assert cut_point(said, None, 0.0, CLAUSE_S + 1) == said[2].end
    paused = words("so", "we", "looked", start=0.0) + words("and", "then", "the", "remote", start=2.0, step=0.8)
    assert cut_point(paused, None, 0.0, CLAUSE_S + 1) == paused[2].end
    run_on = words(*["word"] * 20, step=0.3)  # no clause end, no pause: it waits
    assert cut_point(run_on, None, 0.0, CLAUSE_S + 1) is None
