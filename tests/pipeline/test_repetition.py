"""The loop guard: text that repeats itself is caught, ordinary text is not."""

from speaker_transcripts.pipeline.repetition import compression_ratio, looping, repeated_run


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
