"""The evaluation harness (``speaker-transcripts evaluate``) end to end on tiny models: the harness's plumbing, both diarization sources."""

from __future__ import annotations

import json

import pytest

from speaker_transcripts.cli import evaluate


@pytest.fixture
def manifest(tmp_path, speech_wav):
    (tmp_path / "clip.wav").write_bytes(speech_wav)
    (tmp_path / "clip.rttm").write_text(
        "SPEAKER clip 1 0.000 1.400 <NA> <NA> A <NA> <NA>\nSPEAKER clip 1 1.400 1.386 <NA> <NA> B <NA> <NA>\n"
    )
    (tmp_path / "clip.json").write_text(json.dumps([
        {"speaker": "A", "start": 0.0, "end": 1.4, "text": "Go forward"},
        {"speaker": "B", "start": 1.4, "end": 2.786, "text": "ten meters"},
    ]))
    (tmp_path / "manifest.json").write_text(json.dumps([
        {"audio": "clip.wav", "rttm": "clip.rttm", "transcript": "clip.json", "transcript_format": "turns_json", "kind": "meeting"},
        {"audio": "clip.wav", "text": "go forward ten meters"},
    ]))
    return tmp_path / "manifest.json"


@pytest.mark.parametrize("speakers", ["oracle", "model"])
def test_harness_writes_scores_for_every_entry(manifest, tiny_models, tiny_pyannote, tmp_path, speakers, capsys):
    source = ["--oracle-rttm"] if speakers == "oracle" else ["--diarization-model", str(tiny_pyannote)]
    out = tmp_path / f"out-{speakers}"
    arguments = ["--manifest", str(manifest), "--asr-model", str(tiny_models["whisper"]), *source, "--long-form", "chunked"]
    assert evaluate.main([*arguments, "--out", str(out)]) == 0
    assert "Loading weights" not in capsys.readouterr().err, "the bare pipeline loads without transformers' bars too"
    report = json.loads((out / "results.json").read_text())
    diarized, plain = report["rows"]
    for row in report["rows"]:
        assert row["reference_words"] == 4
        for mode in ("word", "segment"):
            # the handler adds nothing to and loses nothing from the bare pipeline's transcript
            assert row[f"handler_{mode}"]["hypothesis_words"] == row[f"bare_{mode}"]["hypothesis_words"]
            assert row[f"handler_{mode}"]["wer"] == row[f"bare_{mode}"]["wer"]
    assert 0.0 <= diarized["handler_word"]["attribution_accuracy"] <= 1.0 and "cpwer" in diarized["handler_segment"]
    assert "attribution_accuracy" not in plain["handler_word"]
    table = (out / "results.md").read_text()
    assert "| handler_word |" in table
    if speakers == "model":
        scores = diarized["diarization"]
        assert {"der", "der_collar_0.25", "missed_detection", "false_alarm", "confusion", "seconds", "speakers"} <= set(scores)
        assert scores["der"] == pytest.approx(scores["missed_detection"] + scores["false_alarm"] + scores["confusion"], abs=1e-3)
        assert "der" not in plain["diarization"]  # no reference turns to score against
        assert set(report["diarization"]) == {"meeting"}  # totals per manifest kind, of the files with turns
        assert report["diarization"]["meeting"]["der"] == pytest.approx(scores["der"], abs=1e-3)
        assert "| all meeting |" in table and table.count("| clip.wav |") == 4
    else:
        assert "diarization" not in diarized and report["diarization"] is None
        assert table.count("| clip.wav |") == 2


def test_the_bare_pipeline_loads_once_the_handlers_whisper_is_gone(manifest, tiny_models, monkeypatch):
    """One Whisper in memory at a time: the handler runs every entry, then its models are released
    before the bare pipeline loads its own copy (holding both took four short files to 4.4 GB)."""
    import weakref

    import transformers

    from speaker_transcripts.evaluation.evaluate import Evaluation
    from speaker_transcripts.evaluation.scoring import load_manifest

    arguments = evaluate.parse_arguments(["--manifest", str(manifest), "--asr-model", str(tiny_models["whisper"]), "--oracle-rttm"])
    evaluation = Evaluation(arguments)
    entries = load_manifest(manifest)
    rows = [evaluation.run(entry) for entry in entries]
    handler_whisper = weakref.ref(evaluation.handler.recognizer.model)
    alive_when_the_bare_pipeline_loads = []
    load = transformers.pipeline

    encoder_maps = []

    def watched(*args, **kwargs):
        alive_when_the_bare_pipeline_loads.append(handler_whisper() is not None)
        bare = load(*args, **kwargs)
        bare.model.get_encoder().register_forward_hook(
            lambda module, _args, output: encoder_maps.append((output.attentions, module.layers[0].self_attn.config._attn_implementation))
        )
        return bare

    monkeypatch.setattr(transformers, "pipeline", watched)
    done = list(evaluation.add_bare(entries, rows))
    assert alive_when_the_bare_pipeline_loads == [False]
    # its word-timestamp runs keep no encoder attention maps (word alignment reads the decoder's), nor
    # build them: the encoder stays on SDPA when transformers switches the model to eager attention for words
    assert encoder_maps and all(maps is None and attention == "sdpa" for maps, attention in encoder_maps)
    assert evaluation.bare.model.config._attn_implementation == "eager", "the decoder's cross-attention is read for words"
    assert done == rows and all({"bare_word", "bare_segment", "handler_word"} <= set(row) for row in rows)


def test_without_the_eval_extra_it_says_what_to_install_in_one_line(monkeypatch, capsys, tmp_path):
    """jiwer and meeteval are the "eval" extra, not runtime dependencies: evaluate used to end in a
    20-line traceback after `pip install .`, even for --help."""
    import sys

    for module in [name for name in sys.modules if name.startswith("speaker_transcripts.evaluation")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "jiwer", None)  # what an install without the extra finds
    with pytest.raises(SystemExit) as shown:
        evaluate.main(["--help"])
    assert shown.value.code == 0 and "--manifest" in capsys.readouterr().out
    status = evaluate.main(["--manifest", str(tmp_path / "m.json"), "--asr-model", "whisper-tiny.en"])
    assert status == 2 and capsys.readouterr().err.strip() == (
        "speaker-transcripts evaluate needs the scoring libraries (jiwer is not installed): pip install 'speaker-transcripts[eval]'")
