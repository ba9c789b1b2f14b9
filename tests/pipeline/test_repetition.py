"""The loop guard: text that repeats itself is caught, ordinary text is not."""

from speaker_transcripts.pipeline.repetition import compression_ratio, looping, repeated_run, repeated_tail


def test_a_repeated_phrase_or_sentence_is_caught():
    assert repeated_run("It's the much more in it than it's the much more in it than he said yesterday") == "it's the much more"
    assert looping("I think we should ship it. Maybe next week. I think we should ship it.") is not None


def test_ordinary_speech_passes():
    text = ("Good morning, everyone. Let's keep the stand up short today. Morning. Yesterday I finished the login "
            "page and fixed two bugs in the settings screen.")
    assert looping(text) is None
    assert repeated_run("the cat and the dog and the bird") is None  # runs of three repeat, runs of four do not


def test_a_phrase_looping_compresses_past_whispers_limit():
    loop = "Thank you. " * 30
    assert compression_ratio(loop) > 2.4 and "compresses" in looping(loop)
    assert repeated_run("a b c d a b c") is None  # overlapping occurrences are one


def test_a_tail_of_four_copies_of_one_unit_is_a_loop_and_its_first_copy_is_kept():
    words = ["keep", "the", "stand", "up", "short", "today", "morning", "morning", "morning", "morning"]
    assert repeated_tail(words) == 3 and words[: len(words) - 3][-2:] == ["today", "morning"]
    assert repeated_tail([1, 2, 7, 8, 7, 8, 7, 8, 7, 8]) == 6  # a two-token unit: the shortest unit found
    assert repeated_tail([7, 8, 7, 8, 7, 8, 7, 8, 7]) == 6  # a loop cut mid-unit is still one


def test_speech_that_repeats_a_word_three_times_or_not_at_the_end_is_not_a_loop():
    assert repeated_tail(["no", "no", "no"]) == 0
    assert repeated_tail(["well", "well", "well", "well", "then"]) == 0
    assert repeated_tail([]) == 0
    assert repeated_tail(list(range(20)) * 4, longest_unit=16) == 0  # a unit longer than LONGEST_UNIT
