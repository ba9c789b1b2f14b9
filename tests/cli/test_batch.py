"""``speaker-transcripts batch``: usage errors answer at once, before Ray or a model starts."""

from __future__ import annotations

import pytest

from speaker_transcripts.cli import batch


def test_an_input_that_names_nothing_exits_2_at_once(tmp_path, capsys, monkeypatch):
    from speaker_transcripts.batch import job

    monkeypatch.setattr(job, "run_files", lambda *a, **k: pytest.fail("the job started"))
    assert batch.main([str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == batch.EXIT_USAGE
    assert "nowhere: no such file or folder" in capsys.readouterr().err


def test_workers_must_be_positive(tmp_path):
    with pytest.raises(SystemExit) as refused:
        batch.parse_arguments([str(tmp_path), "--out", str(tmp_path / "out"), "--workers", "0"])
    assert refused.value.code == 2


def test_the_request_options_are_the_transcribe_commands(tmp_path):
    from speaker_transcripts.cli.options import request_parameters

    arguments = batch.parse_arguments([str(tmp_path), "--out", "o", "--language", "de", "--num-speakers", "3", "--no-diarize"])
    assert request_parameters(arguments) == {"task": "transcribe", "return_timestamps": "segment", "long_form": "vad",
                                             "assisted": False, "diarize": False, "language": "de", "num_speakers": 3}


def test_one_folder_of_known_speakers_serves_the_whole_corpus(tmp_path, speech_wav):
    import base64

    from speaker_transcripts.cli.options import request_parameters

    voices = tmp_path / "voices"
    voices.mkdir()
    (voices / "Ann.wav").write_bytes(speech_wav)
    arguments = batch.parse_arguments([str(tmp_path), "--out", "o", "--speakers", str(voices)])
    assert request_parameters(arguments)["known_speakers"] == [{"name": "Ann", "audio": base64.b64encode(speech_wav).decode()}]
