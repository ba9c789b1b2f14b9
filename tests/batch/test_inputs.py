"""Which files a batch job is given: folders, patterns, manifests, URIs (no Ray, no models)."""

from __future__ import annotations

import pytest

from speaker_transcripts.batch.inputs import InputError, expand_inputs


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "calls" / "2026").mkdir(parents=True)
    for name in ("calls/a.wav", "calls/2026/b.MP3", "calls/2026/c.flac", "calls/notes.md", "other.opus"):
        (tmp_path / name).write_bytes(b"x" * 10)
    return tmp_path


def test_a_folder_is_searched_recursively_for_audio_only(corpus):
    files = expand_inputs([str(corpus / "calls")])
    assert [file.path for file in files] == [str(corpus / p) for p in ("calls/2026/b.MP3", "calls/2026/c.flac", "calls/a.wav")]
    assert all(file.size == 10 and file.mtime_ns > 0 for file in files)


def test_patterns_manifests_and_repeats(corpus):
    manifest = corpus / "list.txt"
    manifest.write_text("# the calls of the week\ncalls/a.wav\n\nother.opus  # the last one\n")
    files = expand_inputs([str(corpus / "calls" / "*"), str(manifest), str(corpus / "calls" / "a.wav")])
    # calls/* names the folder 2026 (searched) and a.wav, not notes.md; a.wav is listed once
    expected = ("calls/2026/b.MP3", "calls/2026/c.flac", "calls/a.wav", "other.opus")
    assert [file.path for file in files] == [str(corpus / path) for path in expected]


def test_a_uri_is_listed_through_pyarrow(corpus):
    files = expand_inputs([f"file://{corpus / 'calls'}"])
    assert len(files) == 3 and all(file.path.startswith("file:///") for file in files)
    assert files[0].location == str(corpus / "calls/2026/b.MP3")


def test_a_changed_file_has_a_new_key(corpus):
    (before,) = expand_inputs([str(corpus / "other.opus")])
    (corpus / "other.opus").write_bytes(b"y" * 11)
    (after,) = expand_inputs([str(corpus / "other.opus")])
    assert before.key != after.key


@pytest.mark.parametrize(("given", "message"), [("nowhere.wav", "no such file or folder"), ("calls/*.ogg", "matches no file")])
def test_inputs_that_name_nothing_are_refused(corpus, given, message):
    with pytest.raises(InputError, match=message):
        expand_inputs([str(corpus / given)])


def test_a_bad_manifest_line_is_named(corpus):
    manifest = corpus / "list.txt"
    manifest.write_text("calls/a.wav\ncalls/gone.wav\n")
    with pytest.raises(InputError, match=r"list.txt, line 2: .*gone.wav: no such file"):
        expand_inputs([str(manifest)])
