"""The harness's scores on hand-made inputs with known answers."""

from __future__ import annotations

import json

import pytest

from speaker_transcripts.evaluation.scoring import (
    Counts,
    DiarizationTotals,
    attribution,
    cp_word_errors,
    english_normaliser,
    load_manifest,
    named_attribution,
    read_rttm,
    word_errors,
    words_of,
)
from speaker_transcripts.pipeline.diarization import Turn


def test_whisper_normalisation_makes_formatting_free():
    normalise = english_normaliser({"colour": "color"})
    assert words_of("Go forward, ten meters!", normalise) == words_of("go forward 10 meters", normalise)
    assert words_of("The colour's fine.", normalise) == ["the", "color", "is", "fine"]


def test_word_errors_counts_each_kind():
    assert word_errors(["a", "b", "c", "d"], ["a", "x", "c", "d", "e"]) == Counts(2, 4)  # one substitution, one insertion
    assert word_errors(["a", "b"], []) == Counts(2, 2)
    assert word_errors([], ["hallucinated", "words"]) == Counts(2, 0)
    assert Counts(2, 0).rate is None and Counts(1, 4).rate == 0.25
    assert Counts(1, 2) + Counts(3, 4) == Counts(4, 6)


def test_attribution_maps_labels_and_counts_right_words():
    reference = [("hi", "A"), ("there", "A"), ("hello", "B"), ("you", "B")]
    perfect = [("hi", "S1"), ("there", "S1"), ("hello", "S0"), ("you", "S0")]
    result = attribution(reference, perfect)
    assert (result.correct, result.total, result.mapping) == (4, 4, {"S1": "A", "S0": "B"})

    late_switch = [("hi", "S1"), ("there", "S1"), ("hello", "S1"), ("you", "S0")]
    assert attribution(reference, late_switch).accuracy == 0.75
    assert attribution(reference, late_switch).right == (True, True, False, True)  # which word, for a subset's score


def test_attribution_with_asr_errors_and_one_label_for_two_speakers():
    reference = [("hi", "A"), ("there", "A"), ("hello", "B"), ("you", "B")]
    deleted_word = [("hi", "X"), ("hello", "Y"), ("you", "Y")]  # "there" lost: cannot be right
    assert attribution(reference, deleted_word).correct == 3
    assert attribution(reference, deleted_word).right == (True, False, True, True)
    one_label = [(word, "X") for word, _ in reference]  # X maps to one speaker only
    assert attribution(reference, one_label).correct == 2
    assert attribution(reference, []).accuracy == 0.0 and attribution([], one_label).accuracy is None


def test_named_attribution_counts_only_words_on_the_speaker_of_that_name():
    reference = [("hi", "Ann"), ("there", "Ann"), ("hello", "Ben"), ("you", "Ben")]
    assert named_attribution(reference, [("hi", "Ann"), ("there", "Ann"), ("hello", "Ben"), ("you", "Ben")]).correct == 4
    swapped = [("hi", "Ben"), ("there", "Ben"), ("hello", "Ann"), ("you", "Ann")]
    assert named_attribution(reference, swapped).correct == 0 and attribution(reference, swapped).correct == 4
    anonymous = [("hi", "SPEAKER_00"), ("there", "Ann"), ("hello", "Ben")]  # "you" lost
    assert (named_attribution(reference, anonymous).correct, named_attribution(reference, anonymous).accuracy) == (2, 0.5)


def test_cp_wer_charges_misattributed_words():
    reference = {"A": "hi there", "B": "hello you"}
    assert cp_word_errors(reference, {"1": "hi there", "2": "hello you"}) == Counts(0, 4)
    moved = cp_word_errors(reference, {"1": "hi there hello", "2": "you"})
    assert moved == Counts(2, 4), "one word on the wrong speaker: a deletion there and an insertion here"


def test_der_on_known_turns_per_file_and_in_total():
    reference = [Turn("A", 0.0, 10.0), Turn("B", 10.0, 20.0)]
    totals = DiarizationTotals()
    assert totals.add(reference, [Turn("x", 0.0, 10.0), Turn("y", 10.0, 20.0)], 20.0)["der"] == pytest.approx(0.0)
    confused = totals.add(reference, [Turn("x", 0.0, 20.0)], 20.0)  # B's half given to A
    assert (confused["der"], confused["confusion"], confused["missed_detection"]) == pytest.approx((0.5, 0.5, 0.0))
    missed = totals.add(reference, [Turn("x", 0.0, 10.0), Turn("x", 25.0, 30.0)], 20.0)  # B's half missed; 25-30 s lies
    assert (missed["der"], missed["missed_detection"], missed["false_alarm"]) == pytest.approx((0.5, 0.5, 0.0))  # past the file
    shifted = totals.add(reference, [Turn("x", 0.0, 10.2), Turn("y", 10.2, 20.0)], 20.0)
    assert shifted["der"] == pytest.approx(0.01) and shifted["der_collar_0.25"] == pytest.approx(0.0)
    summary = totals.summary()  # errors over all reference speech: (0 + 10 + 10 + 0.2) / 80 s
    assert summary["der"] == pytest.approx(20.2 / 80) and summary["confusion"] == pytest.approx(10.2 / 80)


def test_manifest_with_text_turns_and_rttm(tmp_path):
    (tmp_path / "talk.rttm").write_text(
        "SPEAKER talk 1 2.000 1.500 <NA> <NA> B <NA> <NA>\nSPEAKER talk 1 0.000 2.000 <NA> <NA> A <NA> <NA>\n"
    )
    (tmp_path / "talk.json").write_text(json.dumps([
        {"speaker": "B", "start": 2.0, "end": 3.5, "text": "Fine, thanks."},
        {"speaker": "A", "start": 0.0, "end": 2.0, "text": "How are you?"},
    ]))
    (tmp_path / "read.txt").write_text("go forward ten meters\n")
    (tmp_path / "manifest.json").write_text(json.dumps([
        {"audio": "talk.wav", "rttm": "talk.rttm", "transcript": "talk.json", "transcript_format": "turns_json"},
        {"audio": "read.wav", "transcript": "read.txt", "transcript_format": "text", "language": "en"},
        {"audio": "silence.wav", "text": ""},
    ]))
    talk, read, silence = load_manifest(tmp_path / "manifest.json")
    assert talk.turns == [Turn("A", 0.0, 2.0), Turn("B", 2.0, 3.5)] == read_rttm(tmp_path / "talk.rttm")
    assert talk.text == "How are you? Fine, thanks."
    normalise = english_normaliser()
    assert talk.reference_speaker_words(normalise) == [("how", "A"), ("are", "A"), ("you", "A"), ("fine", "B"), ("thanks", "B")]
    assert talk.reference_by_speaker(normalise) == {"A": "how are you", "B": "fine thanks"}
    assert (read.text, read.language, read.turns, read.speaker_texts) == ("go forward ten meters", "en", [], [])
    assert silence.text == "" and silence.audio == tmp_path / "silence.wav"
