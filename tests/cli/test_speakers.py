"""``speaker-transcripts speakers``: mistakes are one line before any model loads; ``--library`` on either side."""

from __future__ import annotations

import pytest

from speaker_transcripts.cli import speakers


@pytest.mark.parametrize(("name", "message"), [("", "name is empty"), ("SPEAKER_03", "how anonymous speakers are labelled")])
def test_a_name_no_route_would_take_is_one_line_before_anything_loads(name, message, speech_wav, tmp_path, monkeypatch, capsys):
    clip = tmp_path / "clip.wav"
    clip.write_bytes(speech_wav)
    monkeypatch.setattr(speakers, "_add", lambda *a: pytest.fail("the models were loaded"))
    with pytest.raises(SystemExit) as exit_:
        speakers.main(["add", name, str(clip)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "Traceback" not in err and "pydantic" not in err


def test_the_library_may_come_before_or_after_the_subcommand(tmp_path):
    before = speakers.parse_arguments(["--library", str(tmp_path / "a"), "list"])
    after = speakers.parse_arguments(["list", "--library", str(tmp_path / "b")])
    neither = speakers.parse_arguments(["list"])
    assert before.library == tmp_path / "a" and after.library == tmp_path / "b" and neither.library is None
    assert speakers.parse_arguments(["remove", "Ann", "--library", str(tmp_path)]).library == tmp_path


def test_a_fifo_given_as_a_clip_is_refused_unread_and_an_unwritable_library_before_any_model(speech_wav, tmp_path, monkeypatch, capsys):
    """Reading a FIFO would wait forever for a writer; a library under a file cannot be made: both one line, at once."""
    import os

    os.mkfifo(tmp_path / "pipe.wav")
    with pytest.raises(SystemExit) as exit_:
        speakers.main(["add", "Ann", str(tmp_path / "pipe.wav")])
    assert exit_.value.code == 2 and "pipe.wav: not a regular file (a FIFO, a device or a folder)" in capsys.readouterr().err

    clip = tmp_path / "clip.wav"
    clip.write_bytes(speech_wav)
    monkeypatch.setattr(speakers, "_add", lambda *a: pytest.fail("the clip was read or a model loaded"))
    assert speakers.main(["add", "Ann", str(clip), "--library", str(clip / "voices")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"speaker-transcripts speakers: the voice library {clip / 'voices'} cannot be written (Not a directory)"
