"""The transcript's phrase check of the speakers (pipeline/phrase_speakers.py): pure logic, no models."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.pipeline.diarization import Diarization, Turn
from speaker_transcripts.pipeline.phrase_speakers import (
    EMBEDDING_BATCH,
    MIN_SIDE_S,
    PHRASE_MAX_S,
    SPLIT_DISTANCE,
    Phrase,
    checked,
    embedded,
    moved,
    phrases,
    regrouped,
)
from speaker_transcripts.pipeline.transcript import Chunk

RATE = 100  # samples per second of the made-up audio: the check only cuts it by time


def voice(angle_deg: float) -> np.ndarray:
    """A unit vector at ``angle_deg`` from the first axis: cosine distance 1 - cos(angle) apart."""
    angle = np.radians(angle_deg)
    return np.array([np.cos(angle), np.sin(angle), 0.0], dtype=np.float32)


def words_of(*spec: tuple[str, float, float]) -> list[Chunk]:
    return [Chunk(text, start, end) for text, start, end in spec]


def test_phrases_end_at_a_speaker_change_a_sentence_end_a_pause_and_the_length_limit():
    words = words_of(
        (" So", 0.0, 0.3), (" we", 0.3, 0.5), (" agree.", 0.5, 1.0),  # sentence end
        (" Then", 1.0, 1.3), (" lunch", 1.3, 1.6),  # speaker change after "lunch"
        (" Sure", 1.6, 2.0), (" thing", 2.4, 2.8),  # a 0.4-s pause between them
        (" and", 2.8, 3.0),
    ) + [Chunk(" uh", None, None)]  # a word without times belongs to no stretch of audio
    speakers = ["A", "A", "A", "A", "A", "B", "B", "B", "B"]
    assert [(p.speaker, p.words, p.start, p.end) for p in phrases(words, speakers)] == [
        ("A", range(3), 0.0, 1.0), ("A", range(3, 5), 1.0, 1.6), ("B", range(5, 6), 1.6, 2.0), ("B", range(6, 8), 2.4, 3.0),
    ]
    run = words_of(*[(" word", 0.5 * k, 0.5 * k + 0.5) for k in range(10)])  # 5 s without a pause or a full stop
    spans = [(p.start, p.end) for p in phrases(run, ["A"] * 10)]
    assert spans == [(0.0, 3.0), (3.0, 5.0)] and all(end - start <= PHRASE_MAX_S for start, end in spans)


def two_voices(minor_seconds: float, angle: float = 90.0) -> tuple[list[Phrase], list[np.ndarray]]:
    """Speaker A's phrases: 6 of 2 s in one voice, then 3 in another voice ``angle`` degrees away
    whose phrases add up to ``minor_seconds``; speaker B: 4 phrases of a third voice."""
    spoken, vectors = [], []
    for k in range(6):
        spoken.append(Phrase("A", range(k, k + 1), 2.0 * k, 2.0 * k + 2.0))
        vectors.append(voice(3 * (k % 2)))
    for k in range(3):
        start = 20.0 + 2.0 * k
        spoken.append(Phrase("A", range(6 + k, 7 + k), start, start + minor_seconds / 3))
        vectors.append(voice(angle + 3 * (k % 2)))
    for k in range(4):
        spoken.append(Phrase("B", range(9 + k, 10 + k), 30.0 + 2 * k, 31.5 + 2 * k))
        vectors.append(voice(-90))
    return spoken, vectors


def test_a_speaker_holding_two_voices_loses_the_smaller_to_a_new_speaker_or_the_one_it_sounds_like():
    spoken, vectors = two_voices(minor_seconds=MIN_SIDE_S + 1.5)
    labels = regrouped(spoken, vectors, may_add=True, new_label=lambda: "SPEAKER_09")
    assert labels == ["A"] * 6 + ["SPEAKER_09"] * 3 + ["B"] * 4
    # the same three phrases in B's voice go to B, and no speaker is added
    near_b = [vector if k < 6 or k >= 9 else voice(-90 + 3 * (k % 2)) for k, vector in enumerate(vectors)]
    assert regrouped(spoken, near_b, may_add=False, new_label=pytest.fail) == ["A"] * 6 + ["B"] * 7
    # with the count fixed by the client and nobody near, nothing moves
    assert regrouped(spoken, vectors, may_add=False, new_label=pytest.fail) == [phrase.speaker for phrase in spoken]


def test_a_speaker_with_more_phrases_than_are_clustered_is_split_by_a_sample_of_them(monkeypatch):
    from speaker_transcripts.pipeline import phrase_speakers

    spoken, vectors = two_voices(minor_seconds=MIN_SIDE_S + 1.5)
    monkeypatch.setattr(phrase_speakers, "MAX_CLUSTERED", 4)  # A's 9 phrases: every third clustered, the rest by nearness
    assert regrouped(spoken, vectors, may_add=True, new_label=lambda: "NEW") == ["A"] * 6 + ["NEW"] * 3 + ["B"] * 4


def test_one_voice_a_few_odd_phrases_and_too_few_phrases_are_left_alone():
    spoken, vectors = two_voices(minor_seconds=MIN_SIDE_S + 1.5, angle=np.degrees(np.arccos(1.0 - SPLIT_DISTANCE)) - 5)
    assert regrouped(spoken, vectors, True, pytest.fail) == [phrase.speaker for phrase in spoken], "closer than the threshold"
    spoken, vectors = two_voices(minor_seconds=MIN_SIDE_S - 0.5)
    assert regrouped(spoken, vectors, True, pytest.fail) == [phrase.speaker for phrase in spoken], "under MIN_SIDE_S"
    unembedded = [vector if phrase.speaker == "B" or k < 3 else None for k, (phrase, vector) in enumerate(zip(spoken, vectors))]
    assert regrouped(spoken, unembedded, True, pytest.fail) == [phrase.speaker for phrase in spoken], "3 embedded phrases"


def test_a_moved_span_is_carved_out_of_the_turns_and_the_timeline():
    found = Diarization(
        turns=[Turn("A", 0.0, 10.0), Turn("B", 10.0, 14.0)],
        timeline=[Turn("A", 0.0, 10.2), Turn("B", 9.8, 14.0), Turn("C", 3.0, 6.0)],
        embeddings={"A": voice(0), "B": voice(90)},
    )
    result = moved(found, [("B", 9.0, 10.0), ("NEW", 2.0, 4.0), ("NEW", 0.0, 0.05)], {"NEW": voice(180)})
    assert result.turns == [Turn("A", 0.05, 2.0), Turn("NEW", 2.0, 4.0), Turn("A", 4.0, 9.0), Turn("B", 9.0, 14.0)], (
        "B's own turn joined with its span; a 0.05-s sliver of NEW dropped from the turns"
    )
    # on the timeline only the attributed voice (A) gives the span up: C, heard over it, keeps its turn
    assert Turn("C", 3.0, 6.0) in result.timeline and Turn("NEW", 2.0, 4.0) in result.timeline
    assert Turn("A", 0.05, 2.0) in result.timeline and Turn("A", 4.0, 9.0) in result.timeline
    assert Turn("B", 9.0, 14.0) in result.timeline and Turn("A", 10.0, 10.2) in result.timeline
    assert set(result.embeddings) == {"A", "B", "NEW"}


def test_phrases_are_embedded_in_batches_of_one_length_and_short_ones_not_at_all():
    calls = []

    def embed(clips: np.ndarray) -> np.ndarray:
        calls.append(clips.shape)
        return np.ones((len(clips), 3), dtype=np.float32)

    spoken = [Phrase("A", range(k, k + 1), float(k * 4), k * 4 + seconds) for k, seconds in enumerate([0.4, 1.2, 1.4, 3.0] * 20)]
    vectors = embedded(spoken, np.zeros(400 * RATE, dtype=np.float32), RATE, embed)
    assert [vector is None for vector in vectors[:4]] == [True, False, False, False]
    def batches(count: int, length: int) -> list[tuple[int, int]]:
        return [(min(EMBEDDING_BATCH, count - first), length) for first in range(0, count, EMBEDDING_BATCH)]

    assert sorted(calls) == sorted(batches(40, 100) + batches(20, 300)), "1.2 and 1.4 s: 1 s each; 3 s: 3 s; at most EMBEDDING_BATCH a call"


def test_the_check_splits_a_voice_out_of_a_speaker_and_changes_nothing_where_it_may_not():
    """Made-up audio whose sample values say whose voice it is; the stage finds the phrases,
    embeds them with the seam's function and gives the second voice's to a new speaker."""
    sentences = [(k * 2.0, k * 2.0 + 1.6, "Bob" if k in (3, 4, 7, 8) else "Ann") for k in range(10)]
    samples = np.zeros(20 * RATE, dtype=np.float32)
    words = []
    for start, end, who in sentences:
        samples[int(start * RATE) : int(end * RATE)] = 1.0 if who == "Bob" else -1.0
        words += [Chunk(" Well", start, start + 0.8), Chunk(" said.", start + 0.8, end)]

    def embed(clips: np.ndarray) -> np.ndarray:
        return np.stack([voice(90.0 if clip.mean() > 0 else 0.0) for clip in clips])

    found = Diarization(turns=[Turn("SPEAKER_00", 0.0, 19.6)], timeline=[Turn("SPEAKER_00", 0.0, 19.6)], embeddings={"SPEAKER_00": voice(0)})
    check = checked(found, words, samples, RATE, embed, may_add=True)
    result = check.diarization
    bob = [(turn.start, turn.end) for turn in result.turns if turn.speaker == "SPEAKER_01"]
    assert bob == [(6.0, 7.6), (8.0, 9.6), (14.0, 15.6), (16.0, 17.6)]
    assert result.embeddings["SPEAKER_01"] == pytest.approx(voice(90))
    assert check.spread == pytest.approx(1.0, abs=1e-6), "one voice found, its phrases' halves 90 degrees apart"
    assert checked(found, words, samples, RATE, embed, may_add=False).diarization is found
    alone = checked(found, words, np.abs(samples) * -1.0, RATE, embed, may_add=True)  # Ann's voice throughout
    assert alone.diarization is found and alone.spread == pytest.approx(0.0, abs=1e-6)


def test_words_out_of_time_order_and_a_long_word_still_make_sound_phrases_to_embed():
    """Whisper's word times are not always in order (seen: a word ending at 22.9 s, the next at 16.3 s)."""
    words = words_of((" all", 14.6, 22.9), (" right", 22.9, 16.3), (" then", 16.3, 16.6))
    (phrase,) = phrases(words, ["A"] * 3)
    assert (phrase.start, phrase.end) == (14.6, 22.9)
    shapes = []
    embedded([phrase], np.zeros(30 * RATE, dtype=np.float32), RATE, lambda clips: shapes.append(clips.shape) or np.ones((len(clips), 3)))
    assert shapes == [(1, int(PHRASE_MAX_S * RATE))], "at most PHRASE_MAX_S of a phrase is embedded"


def test_pieces_of_one_supposed_voice_are_judged_as_the_phrase_check_judges_a_speaker():
    from speaker_transcripts.pipeline.phrase_speakers import holds_two_voices

    far = np.degrees(np.arccos(1.0 - SPLIT_DISTANCE)) + 10
    two = [voice(0), voice(3), voice(0), voice(far), voice(far + 3), voice(far)]
    assert holds_two_voices(two, [1.5] * 6, min_side_s=2.0)
    assert not holds_two_voices(two, [1.5] * 6, min_side_s=5.0), "each side under min_side_s"
    near = np.degrees(np.arccos(1.0 - SPLIT_DISTANCE)) - 10
    assert not holds_two_voices([voice(0), voice(3), voice(near), voice(near + 3)], [1.5] * 4, min_side_s=2.0)
    assert not holds_two_voices(two[:3], [1.5] * 3, min_side_s=1.0), "too few pieces to tell"
