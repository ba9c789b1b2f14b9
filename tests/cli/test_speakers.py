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
