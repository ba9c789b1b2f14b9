"""The CLI runs the handler over several files and keeps going past a broken one."""

from __future__ import annotations

import json

import cli


def test_cli_transcribes_good_files_and_reports_bad_ones(tiny_models, speech_wav, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    good = tmp_path / "good.wav"
    good.write_bytes(speech_wav)
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"not audio at all")
    missing = tmp_path / "missing.wav"

    status = cli.main([str(broken), str(good), str(missing), "--language", "en"])

    captured = capsys.readouterr()
    results = [json.loads(line) for line in captured.out.splitlines()]
    assert status == 1
    assert [r["file"] for r in results] == [str(good)]
    assert results[0]["language"] == "en" and results[0]["chunks"]
    assert "broken.wav: could not decode" in captured.err and "missing.wav" in captured.err
