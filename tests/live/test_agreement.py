"""LocalAgreement-2: a word is final once two consecutive hypotheses agree on it and on all before it."""

from speaker_transcripts.live.agreement import LocalAgreement
from speaker_transcripts.pipeline.transcript import Chunk


def words(*timed: tuple[str, float, float]) -> list[Chunk]:
    return [Chunk(f" {text}", start, end) for text, start, end in timed]


def test_only_the_prefix_two_hypotheses_share_is_final():
    agreement = LocalAgreement()
    assert agreement.update(words(("Go", 0.0, 0.3), ("for", 0.3, 0.5))) == []
    final = agreement.update(words(("Go", 0.0, 0.3), ("forward", 0.3, 0.7), ("ten", 0.7, 0.9)))
    assert [word.text for word in final] == [" Go"]
    final = agreement.update(words(("Go", 0.0, 0.3), ("forward", 0.3, 0.7), ("ten", 0.7, 0.9), ("meters.", 0.9, 1.4)))
    assert [word.text for word in final] == [" forward", " ten"]
    assert [word.text for word in agreement.tentative] == [" meters."]


def test_case_and_punctuation_aside_the_words_agree_and_the_newer_spelling_is_kept():
    agreement = LocalAgreement()
    agreement.update(words(("meters", 0.0, 0.5), ("go", 0.6, 0.8)))
    final = agreement.update(words(("meters.", 0.0, 0.5), ("Go", 0.6, 0.8)))
    assert [word.text for word in final] == [" meters.", " Go"]
    assert agreement.update(words(("metres", 0.9, 1.2))) == []  # a different word is no agreement


def test_final_words_are_not_final_twice_when_the_buffer_is_decoded_again():
    agreement = LocalAgreement()
    agreement.update(words(("Good", 0.0, 0.4), ("morning.", 0.4, 1.0)))
    agreement.update(words(("Good", 0.0, 0.4), ("morning.", 0.4, 1.0)))
    # the same buffer decoded again: old words drop out by time, a straddling one by the n-gram check
    again = words(("Good", 0.02, 0.4), ("morning.", 0.92, 1.0), ("Let's", 1.1, 1.3))
    assert agreement.update(again) == []
    assert [word.text for word in agreement.tentative] == [" Let's"]


def test_flush_makes_the_last_hypothesis_final():
    agreement = LocalAgreement()
    agreement.update(words(("Yes", 0.0, 0.3)))
    assert [word.text for word in agreement.flush()] == [" Yes"]
    assert agreement.tentative == [] and agreement.last_end == 0.3


def test_a_word_well_before_the_end_of_the_audio_heard_is_final_after_one_decode():
    """AlignAtt's rule read off the word times: words ending SETTLED_S or more before the end of the
    audio the decode heard are final at once, up to the first that does not; the rest wait for agreement."""
    from speaker_transcripts.live.agreement import SETTLED_S

    agreement = LocalAgreement()
    heard = words(("Go", 0.0, 0.3), ("forward", 0.3, 0.7), ("ten", 0.7, 0.9), ("meters.", 0.9, 1.4))
    final = agreement.update(heard, heard_until=0.8 + SETTLED_S)
    assert [word.text for word in final] == [" Go", " forward"]
    assert [word.text for word in agreement.tentative] == [" ten", " meters."]
    assert agreement.update(heard, heard_until=0.8 + SETTLED_S) == heard[2:]  # then agreement: the next decode says the same
    assert LocalAgreement().update(heard, heard_until=None) == []  # agreement alone: nothing after one decode
