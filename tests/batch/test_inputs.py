"""Which files a batch job is given: folders, patterns, manifests, URIs (no Ray, no models)."""

from __future__ import annotations

from pathlib import Path

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
    assert files[0].path == f"file://{corpus / 'calls/2026/b.MP3'}"


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


def test_a_pattern_over_a_folder_linking_to_its_parent_returns(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.wav").write_bytes(b"RIFF")
    (tmp_path / "a" / "up").symlink_to(tmp_path)  # a loop glob.glob followed until the path was too long (or forever)
    assert [file.path for file in expand_inputs([str(tmp_path / "**" / "*.wav")])] == [str(tmp_path / "a" / "x.wav")]


def test_a_folder_does_not_follow_links_out_of_it(tmp_path):
    outside = tmp_path / "secret.wav"
    outside.write_bytes(b"RIFF")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "mine.wav").write_bytes(b"RIFF")
    (tmp_path / "corpus" / "theirs.wav").symlink_to(outside)
    assert [Path(file.path).name for file in expand_inputs([str(tmp_path / "corpus")])] == ["mine.wav"]


def test_a_manifest_that_names_itself_or_a_loop_of_two_is_an_input_error(tmp_path):
    (tmp_path / "self.txt").write_text("self.txt\n")
    (tmp_path / "one.txt").write_text("two.txt\n")
    (tmp_path / "two.txt").write_text("one.txt\n")
    for manifest in ("self.txt", "one.txt"):
        with pytest.raises(InputError, match="a loop"):
            expand_inputs([str(tmp_path / manifest)])


def test_a_pattern_skips_what_a_folder_skips_links_out_devices_and_fifos(tmp_path):
    import os

    (tmp_path / "calls").mkdir()
    (tmp_path / "calls" / "mine.wav").write_bytes(b"RIFF")
    (tmp_path / "secret.wav").write_bytes(b"RIFF")
    (tmp_path / "calls" / "theirs.wav").symlink_to(tmp_path / "secret.wav")
    (tmp_path / "calls" / "zero.wav").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "calls" / "pipe.wav")
    for given in (str(tmp_path / "calls" / "*"), str(tmp_path / "calls" / "*.wav"), str(tmp_path / "calls")):
        assert [Path(file.path).name for file in expand_inputs([given])] == ["mine.wav"], given


def test_a_file_name_cannot_forge_a_progress_line():
    from speaker_transcripts.console import one_line

    assert one_line("calls/a.wav: done\n[2/2] calls/b.wav\u2028\x1b[2J é.wav") == "calls/a.wav: done\\n[2/2] calls/b.wav\\u2028\\x1b[2J é.wav"
