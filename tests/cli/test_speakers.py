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


def test_a_long_clip_is_refused_in_one_line_without_holding_copies_of_it(tmp_path, monkeypatch, capsys):
    """A 20-minute recording given as a clip: refused once 30 s are decoded, before any model loads, with
    the file read once (as base64, a 100-MB clip took 914 MB and 9 s to refuse; now 3.5 s and the process's baseline)."""
    import tracemalloc
    import wave

    import numpy as np

    from speaker_transcripts.models import registry

    clip = tmp_path / "meeting.wav"
    with wave.open(str(clip), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(16000)
        file.writeframes(np.zeros(16000 * 60 * 20, dtype="<i2").tobytes())
    monkeypatch.setattr(registry, "prepare", lambda *a: pytest.fail("a model was prepared"))
    from speaker_transcripts.pipeline import speech_gate, transcriber  # noqa: F401 (imported before memory is traced)

    tracemalloc.start()
    try:
        status = speakers.main(["--library", str(tmp_path / "voices"), "add", "Ann", str(clip)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err.splitlines()
    assert status == 2 and err[-1] == ("speaker-transcripts speakers: known speaker 'Ann': the clip is longer than 30 s; "
                                       "send a few seconds of this speaker alone")
    assert peak < 1.5 * clip.stat().st_size, (peak, clip.stat().st_size)
