"""The voice library: voices kept once, read for the model they belong to, anything else left out."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.pipeline.voice_library import FollowedLibrary, VoiceLibrary


def test_a_voice_is_the_mean_direction_of_its_clips_and_survives_a_reread(tmp_path):
    library = VoiceLibrary(tmp_path / "voices")
    voice = library.add("Ann Lee", [np.array([3.0, 0.0]), np.array([0.0, 1.0])], "pyannote-campplus")
    assert np.allclose(voice.embedding, [np.sqrt(0.5), np.sqrt(0.5)]) and voice.clips == 2
    (read,) = VoiceLibrary(tmp_path / "voices").voices()
    assert (read.name, read.model, read.clips, read.dimension) == ("Ann Lee", "pyannote-campplus", 2, 2)
    assert np.allclose(read.embedding, voice.embedding, atol=1e-6)


def test_a_voice_keeps_its_telephone_band_embedding_and_older_files_read_without_one(tmp_path):
    library = VoiceLibrary(tmp_path)
    library.add("Ann", [np.array([1.0, 0.0])], "m", telephone=[np.array([0.0, 2.0])])
    library.add("Ben", [np.array([1.0, 0.0])], "m")  # enrolled before telephone embeddings were kept
    ann, ben = library.voices()
    assert np.allclose(ann.telephone, [0.0, 1.0]) and ben.telephone is None
    assert set(library.for_model("m")) == {"Ann", "Ben"}


def test_adding_a_name_again_replaces_it_and_remove_forgets_it(tmp_path):
    library = VoiceLibrary(tmp_path)
    library.add("Ann", [np.array([1.0, 0.0])], "m")
    library.add("ann", [np.array([0.0, 1.0])], "m")  # one person whatever the case
    assert [voice.name for voice in library.voices()] == ["ann"]
    assert library.remove("ANN") and not library.remove("ANN") and library.voices() == []


def test_voices_of_another_model_or_dimension_and_broken_files_are_left_out(tmp_path):
    library = VoiceLibrary(tmp_path)
    library.add("Ann", [np.ones(3)], "pyannote-campplus")
    library.add("Ben", [np.ones(3)], "pyannote/speaker-diarization-community-1")
    library.add("Cal", [np.ones(4)], "pyannote-campplus")
    (tmp_path / "notes.json").write_text("{not json")
    (tmp_path / "old.json").write_text('{"version": 0}')
    assert list(library.for_model("pyannote-campplus", dimension=3)) == ["Ann"]
    assert [voice.name for voice in library.voices()] == ["Ann", "Ben", "Cal"]
    assert VoiceLibrary(tmp_path / "missing").voices() == []


def test_two_enrolments_of_one_name_at_once_leave_one_whole_voice(tmp_path):
    """Many writers of one name, each with its own vector: no error, no temporary file left behind, and
    the voice read back is one writer's whole (a shared temporary name let one rename the other's)."""
    from concurrent.futures import ThreadPoolExecutor

    library = VoiceLibrary(tmp_path / "voices")
    vectors = [np.eye(4, dtype=np.float32)[index % 4] + 0.1 for index in range(32)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda vector: library.add("Ann", [vector], "model-a"), vectors))
    (voice,) = library.voices()
    assert any(np.allclose(voice.embedding, vector / np.linalg.norm(vector)) for vector in vectors)
    assert sorted(path.suffix for path in (tmp_path / "voices").iterdir()) == [".json"]


def test_a_library_that_cannot_be_written_is_said_in_one_line(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    library = VoiceLibrary(tmp_path / "a-file" / "voices")
    with pytest.raises(InvalidRequestError, match=r"the voice library .*a-file/voices cannot be written \(Not a directory\)"):
        library.add("Ann", [np.ones(4, dtype=np.float32)], "model-a")


def test_a_fifo_in_the_library_is_left_out_unread(tmp_path, monkeypatch):
    import os

    from speaker_transcripts.pipeline import voice_library

    warned: list[str] = []
    monkeypatch.setattr(voice_library.logger, "warning", lambda message, *values: warned.append(message % values))
    library = VoiceLibrary(tmp_path)
    library.add("Ann", [np.ones(4, dtype=np.float32)], "model-a")
    os.mkfifo(tmp_path / "pipe.json")
    assert [voice.name for voice in library.voices()] == ["Ann"]
    assert warned == [f"voice library {tmp_path}: pipe.json is not a voice (not a regular file); left out"]


def test_a_followed_library_sees_what_another_process_adds_and_removes(tmp_path):
    """A running server reads its folder again when it changes: no restart after ``speakers add``/``remove``."""
    followed = FollowedLibrary(tmp_path / "voices", "model-a", 2)
    assert followed.voices() == {}  # no folder yet
    elsewhere = VoiceLibrary(tmp_path / "voices")  # another process's view of the same folder
    elsewhere.add("Ann", [np.array([1.0, 0.0])], "model-a")
    assert list(followed.voices()) == ["Ann"]
    elsewhere.add("Bob", [np.array([0.0, 1.0])], "model-a")
    elsewhere.add("Ann", [np.array([0.6, 0.8])], "model-a")  # replaced: the same file, new contents
    assert sorted(followed.voices()) == ["Ann", "Bob"] and np.allclose(followed.voices()["Ann"].embedding, [0.6, 0.8])
    assert elsewhere.remove("Bob")
    assert list(followed.voices()) == ["Ann"]


@pytest.mark.parametrize("look_alike", ["\u0410nna", "\uff21\uff4e\uff4e\uff41", "\u00c1nna"], ids=["Cyrillic A", "fullwidth", "accented"])
def test_a_name_that_only_looks_like_an_enrolled_one_is_refused(tmp_path, look_alike):
    """Two people who read as one ("Anna" and "Аnna") would be told apart by nobody reading the transcript."""
    library = VoiceLibrary(tmp_path)
    library.add("Anna", [np.array([1.0, 0.0])], "model-a")
    with pytest.raises(InvalidRequestError, match="looks like 'Anna'"):
        library.add(look_alike, [np.array([0.0, 1.0])], "model-a")
    library.add("ANNA", [np.array([0.0, 1.0])], "model-a")  # the same name in another case replaces her voice
    assert [voice.name for voice in library.voices()] == ["ANNA"]


def test_the_library_holds_at_most_max_voices_people(tmp_path):
    library = VoiceLibrary(tmp_path)
    for name in ("Ann", "Bob"):
        library.add(name, [np.array([1.0, 0.0])], "model-a", max_voices=2)
    with pytest.raises(InvalidRequestError, match="MAX_VOICES"):
        library.add("Cy", [np.array([1.0, 0.0])], "model-a", max_voices=2)
    library.add("bob", [np.array([0.0, 1.0])], "model-a", max_voices=2)  # a replacement takes no room
    assert len(library.voices()) == 2
