"""The CLI runs the handler over several files, keeps going past broken ones, writes every format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import srt

from speaker_transcripts.cli import options
from speaker_transcripts.cli import transcribe as cli
from speaker_transcripts.output.formats import subtitle_cues, to_srt


@pytest.fixture
def audio_files(tmp_path, speech_wav) -> dict[str, Path]:
    files = {"good": tmp_path / "good.wav", "broken": tmp_path / "broken.wav", "missing": tmp_path / "missing.wav"}
    files["good"].write_bytes(speech_wav)
    files["broken"].write_bytes(b"not audio at all")
    return files


def test_json_lines_on_stdout_and_errors_on_stderr(tiny_models, audio_files, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    status = cli.main([str(audio_files["broken"]), str(audio_files["good"]), "--language", "en"])
    captured = capsys.readouterr()
    results = [json.loads(line) for line in captured.out.splitlines()]
    assert status == cli.EXIT_FILE_FAILED
    assert [r["file"] for r in results] == [str(audio_files["good"])]
    assert results[0]["language"] == "en" and results[0]["chunks"] and results[0]["speakers"] == []
    assert "broken.wav: could not decode" in captured.err


def test_every_format_to_an_output_directory_with_speakers_and_a_plot(tiny_models, tiny_pyannote, audio_files, tmp_path, speech_wav):
    second = tmp_path / "other" / "good.flac"  # same stem as good.wav: both outputs must survive
    second.parent.mkdir()
    second.write_bytes(speech_wav)  # a WAV under a .flac name still decodes: the container is sniffed
    out = tmp_path / "out"
    for output_format in ("json", "txt", "srt", "vtt", "rttm"):
        status = cli.main([
            str(audio_files["good"]), str(second), "--format", output_format, "--out", str(out), "--language", "en",
            "--diarize", "--diarization-model", str(tiny_pyannote), "--asr-model", str(tiny_models["whisper"]),
            *(["--plot"] if output_format == "json" else []),
        ])
        assert status == 0
    written = sorted(path.name for path in out.iterdir())
    assert written == sorted(f"good.{name}.{ext}" for name in ("wav", "flac") for ext in ("json", "txt", "srt", "vtt", "rttm", "png"))
    result = json.loads((out / "good.wav.json").read_text())
    assert result["speakers"], "the tiny pyannote pipeline finds speakers in real speech"
    subtitles = list(srt.parse((out / "good.wav.srt").read_text()))
    assert subtitles[0].content.startswith(result["speakers"][0]["speaker"] + ": ")
    words = tmp_path / "words"  # diarizing computed word times; the cues are laid out from them
    assert cli.main([
        str(audio_files["good"]), "--timestamps", "word", "--out", str(words), "--language", "en",
        "--diarize", "--diarization-model", str(tiny_pyannote), "--asr-model", str(tiny_models["whisper"]),
    ]) == 0
    assert (out / "good.wav.srt").read_text() == to_srt(subtitle_cues(json.loads((words / "good.json").read_text())))
    assert (out / "good.wav.vtt").read_text().startswith("WEBVTT")
    assert (out / "good.wav.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rttm = (out / "good.wav.rttm").read_text().splitlines()
    assert len(rttm) == len(result["diarization"]) and all(line.startswith("SPEAKER good 1 ") for line in rttm)


def test_documents_on_stdout_get_a_header_per_file(tiny_models, audio_files, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    status = cli.main([str(audio_files["good"]), str(audio_files["good"]), "--format", "vtt", "--language", "en"])
    out = capsys.readouterr().out
    assert status == 0 and out.count(f"==> {audio_files['good']} <==") == 2 and out.count("WEBVTT") == 2


def test_missing_models_are_reported_before_any_file(tiny_models, audio_files, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    with pytest.raises(SystemExit, match="DIARIZATION_MODEL"):
        cli.main([str(audio_files["good"]), "--diarize"])
    with pytest.raises(SystemExit, match="ASSISTANT_MODEL"):
        cli.main([str(audio_files["good"]), "--assistant"])
    assert cli.main([str(audio_files["good"]), "--asr-model", str(audio_files["good"].parent / "nowhere")]) == cli.EXIT_NOT_STARTED
    assert "could not load the models" in capsys.readouterr().err
    # no Hub here (HF_HUB_OFFLINE=1): one line naming the embedded alternative, in seconds
    assert cli.main([str(audio_files["good"]), "--asr-model", "openai/whisper-never-cached"]) == cli.EXIT_NOT_STARTED
    error = capsys.readouterr().err
    assert error.startswith("could not load the models: ASR_MODEL=openai/whisper-never-cached cannot be fetched")
    assert "ASR_MODEL=whisper-base" in error and "HF_TOKEN" in error and error.count("\n") == 1


def test_assisted_run_and_parameters(tiny_models, audio_files, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    monkeypatch.setenv("ASSISTANT_MODEL", str(tiny_models["assistant"]))
    assert cli.main([str(audio_files["good"]), "--assistant", "--timestamps", "word", "--language", "en"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert any("batch_size 24 was reduced to 1" in warning for warning in result["warnings"])
    arguments = cli.parse_arguments(["x.wav", "--num-speakers", "3", "--prompt", "Names: Ada.", "--long-form", "chunked"])
    assert options.request_parameters(arguments) == {
        "task": "transcribe", "return_timestamps": "segment", "assisted": False, "long_form": "chunked",
        "prompt": "Names: Ada.", "num_speakers": 3,
    }


def test_subtitle_rules_from_the_command_line(tiny_models, audio_files, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    assert cli.main([str(audio_files["good"]), "--max-cue-seconds", "9", "--min-cue-seconds", "10"]) == 2
    assert "unusable subtitle rules" in capsys.readouterr().err


def test_models_default_to_the_embedded_ones_and_no_diarize_skips_diarization(monkeypatch, audio_files):
    """Without settings the CLI asks for the embedded whisper-base and diarization pipeline
    (captured here rather than loaded); --no-diarize loads no diarization model at all."""
    from speaker_transcripts.pipeline import transcriber as handler
    monkeypatch.delenv("DIARIZATION_MODEL", raising=False)
    built = []
    monkeypatch.setattr(handler, "Transcriber", lambda settings: built.append(settings))
    cli.load_handler(cli.parse_arguments([str(audio_files["good"])]))
    cli.load_handler(cli.parse_arguments([str(audio_files["good"]), "--no-diarize"]))
    cli.load_handler(cli.parse_arguments([str(audio_files["good"]), "--diarization-model", "none"]))  # as DIARIZATION_MODEL=none does
    assert built[2].diarization_model is None
    assert (built[0].asr_model, built[0].diarization_model) == ("whisper-base", "pyannote-campplus")
    assert built[0].warmup is False, "a CLI run has no second request for a warm-up to speed up"
    assert (built[1].asr_model, built[1].diarization_model) == ("whisper-base", None)
    assert "diarize" not in options.request_parameters(cli.parse_arguments([str(audio_files["good"])]))


def test_silence_is_reported_on_stderr_not_left_as_an_empty_document(tiny_models, tmp_path, monkeypatch, capsys):
    import wave

    silent = tmp_path / "silent.wav"
    with wave.open(str(silent), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(16000)
        writer.writeframes(b"\x00\x00" * 16000 * 3)
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    assert cli.main([str(silent), "--format", "srt", "--language", "en"]) == 0
    captured = capsys.readouterr()
    assert f"{silent}: no speech detected" in captured.err and captured.out.strip() == ""


@pytest.mark.parametrize("options", [["--num-speakers", "0"], ["--min-speakers", "3", "--max-speakers", "1"]])
def test_parameters_that_cannot_work_exit_2_before_the_models_load(audio_files, options, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    assert cli.main([str(audio_files["good"]), *options]) == cli.EXIT_NOT_STARTED
    assert "speakers" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--speaker", "Ann"], "write it NAME=FILE"),
        (["--speaker", "Ann=/no/such/clip.wav"], "no such file"),
        (["--speakers", "/no/such/folder"], "not a folder"),
    ],
)
def test_unusable_known_speaker_options_are_usage_errors(audio_files, options, message, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    with pytest.raises(SystemExit) as exited:
        cli.main([str(audio_files["good"]), *options])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_a_clip_that_cannot_name_anyone_is_one_line_before_the_models_load(audio_files, tmp_path, monkeypatch, capsys):
    """A clip of silence, or of no audio at all: said once, naming the speaker, before loading, not once per file after it."""
    import numpy as np
    from audio_files import pcm_wav

    (tmp_path / "quiet.wav").write_bytes(pcm_wav(np.zeros(16000 * 3, dtype=np.float32)))
    (tmp_path / "notes.wav").write_text("not audio")
    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    files = [str(audio_files["good"]), str(audio_files["good"])]
    assert cli.main([*files, "--speaker", f"Ann={tmp_path / 'quiet.wav'}"]) == cli.EXIT_NOT_STARTED
    quiet = capsys.readouterr().err
    assert cli.main([*files, "--speaker", f"Ben={tmp_path / 'notes.wav'}"]) == cli.EXIT_NOT_STARTED
    broken = capsys.readouterr().err
    assert quiet.count("known speaker 'Ann'") == 1 and "s of speech" in quiet
    assert broken.count("known speaker 'Ben'") == 1 and "could not decode" in broken


@pytest.mark.parametrize("output", ["txt", "srt", "vtt"])
def test_diarization_alone_in_a_text_format_is_a_usage_error(audio_files, output, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    assert cli.main([str(audio_files["good"]), "--task", "diarize", "--format", output]) == cli.EXIT_NOT_STARTED
    assert "use --format rttm" in capsys.readouterr().err


def test_the_answers_warnings_are_on_stderr_whatever_the_format(tiny_models, audio_files, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    assert cli.main([str(audio_files["good"]), "--format", "txt", "--num-speakers", "2", "--no-diarize"]) == 0
    err = capsys.readouterr().err
    assert "good.wav: warning: num_speakers ignored" in err


def test_rttm_without_diarization_is_a_usage_error(audio_files, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    assert cli.main([str(audio_files["good"]), "--format", "rttm", "--no-diarize"]) == cli.EXIT_NOT_STARTED
    assert "drop --no-diarize" in capsys.readouterr().err


def test_known_speakers_from_options_and_a_folder(tmp_path, speech_wav):
    import base64

    from speaker_transcripts.cli.options import request_parameters

    folder = tmp_path / "voices"
    folder.mkdir()
    (folder / "Ann.wav").write_bytes(speech_wav)
    (folder / "notes.txt").write_text("not a clip")
    clip = tmp_path / "ben.flac"
    clip.write_bytes(b"flac bytes")
    arguments = cli.parse_arguments(["x.wav", "--speakers", str(folder), "--speaker", f"Ben Ode={clip}"])
    assert request_parameters(arguments)["known_speakers"] == [
        {"name": "Ann", "audio": base64.b64encode(speech_wav).decode()},
        {"name": "Ben Ode", "audio": base64.b64encode(b"flac bytes").decode()},
    ]
    assert "known_speakers" not in request_parameters(cli.parse_arguments(["x.wav"]))


def test_unusable_inputs_and_outputs_exit_2_before_the_models_load(audio_files, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    good = str(audio_files["good"])
    a_file = tmp_path / "taken"
    a_file.write_text("")
    empty = tmp_path / "empty"
    empty.mkdir()
    long_name = tmp_path / ("x" * 252 + ".au")  # 255 bytes: the longest name; its .rttm output would be 257
    long_name.write_bytes(audio_files["good"].read_bytes())
    for arguments, message in [
        ([good, str(audio_files["missing"])], "missing.wav: no such file or folder"),
        ([str(empty)], "the folder holds no audio files"),
        ([good, "--out", str(a_file)], "exists and is not a folder"),
        ([str(long_name), "--out", str(tmp_path / "out"), "--format", "rttm"], "longer than this file system allows"),
        ([good, "--language", "xx"], "unknown language 'xx'"),
    ]:
        assert cli.main(arguments) == cli.EXIT_NOT_STARTED, arguments
        assert message in capsys.readouterr().err, arguments
    assert cli.main([str(audio_files["broken"])]) == cli.EXIT_FILE_FAILED  # a file that cannot be read: 1, as the docs say
    assert "broken.wav: could not decode" in capsys.readouterr().err


def test_a_folder_is_transcribed_file_by_file(tiny_models, speech_wav, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "calls"
    (folder / "monday").mkdir(parents=True)
    (folder / "b.wav").write_bytes(speech_wav)
    (folder / "monday" / "a.wav").write_bytes(speech_wav)
    (folder / "notes.txt").write_text("not audio")
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    assert cli.main([str(folder), "--language", "en", "--format", "txt", "--out", str(tmp_path / "out")]) == 0
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["a.txt", "b.txt"]


def test_a_result_that_cannot_be_written_is_printed_not_lost(tiny_models, audio_files, tmp_path, monkeypatch, capsys):
    """In the format asked for (an SRT that cannot be written is printed as SRT), and said on stderr."""
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    write_result = cli.write_result

    def full_disk(path, result, output_format, destination, **kwargs):
        if destination is not None:
            raise OSError(28, "No space left on device", str(destination))
        return write_result(path, result, output_format, destination, **kwargs)

    monkeypatch.setattr(cli, "write_result", full_disk)
    assert cli.main([str(audio_files["good"]), "--language", "en", "--format", "srt", "--out", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert "No space left on device); the srt follows on stdout" in captured.err
    assert captured.out.startswith(f"==> {audio_files['good']} <==\n") and '"chunks"' not in captured.out, captured.out[:80]


def test_written_files_are_named_on_stderr(tiny_models, audio_files, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    assert cli.main([str(audio_files["good"]), "--language", "en", "--format", "vtt", "--out", str(tmp_path / "out")]) == 0
    assert f"wrote {tmp_path / 'out' / 'good.vtt'}" in capsys.readouterr().err

@pytest.mark.parametrize("off", [["--diarization-model", "none"], ["--no-diarize"]])
def test_known_speakers_without_diarization_name_the_conflict_before_the_models_load(audio_files, off, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    assert cli.main([str(audio_files["good"]), "--speaker", f"Ann={audio_files['good']}", *off]) == cli.EXIT_NOT_STARTED
    err = capsys.readouterr().err
    assert "--speaker" in err and off[0] in err and "drop one or the other" in err


def test_an_empty_or_truncated_file_says_what_the_server_says_and_exits_1(audio_files, tmp_path, monkeypatch, capsys):
    from speaker_transcripts.pipeline.audio import EMPTY_AUDIO

    monkeypatch.setattr(cli, "load_handler", lambda arguments: pytest.fail("the models were loaded"))
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    assert cli.main([str(empty)]) == cli.EXIT_FILE_FAILED
    assert capsys.readouterr().err.strip() == f"{empty}: {EMPTY_AUDIO}"
