"""The root's ``config.py`` and ``diarization_utils.py``: the blog handler's doors into the package.

A fork of the blog's handler imports ``from config import model_settings, InferenceConfig`` and
``from diarization_utils import diarize`` and calls ``diarize(pipeline, audio_bytes, parameters,
asr_outputs)`` after its ASR pipeline; these tests do the same, and check the doors run the package's
own classes and merge rather than a second copy.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from conftest import two_speakers

import speaker_transcripts.config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def blog_modules(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    modules = {name: importlib.import_module(name) for name in ("config", "diarization_utils")}
    assert all(Path(module.__file__).parent == ROOT for module in modules.values()), modules
    return modules


def test_config_is_the_packages_settings_and_reads_the_environment_on_first_use(blog_modules, monkeypatch):
    config = blog_modules["config"]
    assert config.ModelSettings is speaker_transcripts.config.ModelSettings
    assert config.InferenceConfig is speaker_transcripts.config.InferenceConfig
    config.__dict__.pop("model_settings", None)
    monkeypatch.setenv("ASR_MODEL", "whisper-tiny.en")
    monkeypatch.setenv("DIARIZATION_MODEL", "pyannote-campplus")
    from config import model_settings

    assert (model_settings.asr_model, model_settings.diarization_model) == ("whisper-tiny.en", "pyannote-campplus")
    config.__dict__.pop("model_settings", None)


def test_diarize_as_the_blogs_handler_calls_it(blog_modules, speech_wav):
    """The blog's handler: ``parameters = InferenceConfig(**parameters)``, its ASR pipeline's answer, then
    ``diarize(self.diarization_pipeline, file, parameters, asr_outputs)``; each chunk gets its speaker by its
    own time, the last chunk's open end is closed, nothing is dropped."""
    from config import InferenceConfig
    from diarization_utils import diarize

    parameters = InferenceConfig(num_speakers=2, language="en")
    asr_outputs = {
        "text": " Go forward, ten meters.",
        "chunks": [{"text": " Go forward,", "timestamp": (0.1, 1.2)}, {"text": " ten meters.", "timestamp": (1.5, None)}],
    }
    transcript = diarize(two_speakers, speech_wav, parameters, asr_outputs)
    assert transcript == [
        {"speaker": "ALICE", "text": " Go forward,", "timestamp": (0.1, 1.2)},
        {"speaker": "BOB", "text": " ten meters.", "timestamp": (1.5, 3.0)},
    ]


def test_the_steps_take_the_blogs_arguments_and_pass_only_the_hints_sent(blog_modules, speech_wav):
    from diarization_utils import diarize_audio, post_process_segments_and_transcripts, preprocess_inputs

    samples, diarizer_inputs = preprocess_inputs(speech_wav)
    assert samples.ndim == 1 and tuple(diarizer_inputs.shape) == (1, len(samples))
    assert 2.7 < len(samples) / 16000 < 2.9
    hints_seen = []

    def pipeline(audio, **hints):
        hints_seen.append(hints)
        assert audio["sample_rate"] == 16000 and tuple(audio["waveform"].shape) == (1, len(samples))
        return two_speakers(audio)

    segments = diarize_audio(diarizer_inputs, pipeline, {"min_speakers": 1})
    assert hints_seen == [{"min_speakers": 1}]
    assert segments == [{"segment": {"start": 0.0, "end": 1.4}, "speaker": "ALICE"}, {"segment": {"start": 1.4, "end": 3.0}, "speaker": "BOB"}]
    words = [{"text": f" w{index}", "timestamp": (index * 0.3, index * 0.3 + 0.25)} for index in range(9)]
    grouped = post_process_segments_and_transcripts(segments, words, group_by_speaker=True)
    assert [segment["speaker"] for segment in grouped] == ["ALICE", "BOB"]
    assert " ".join(segment["text"] for segment in grouped).split() == [f"w{index}" for index in range(9)]


def test_the_docs_example_runs_as_written(blog_modules, speech_wav, capsys):
    """docs/endpoints.md, "Coming from the blog's handler", with the stand-in pyannote and an ASR answer."""
    from documentation import python_blocks

    (code,) = [block for block in python_blocks() if "from diarization_utils import diarize" in block]
    asr_outputs = {"text": " Go forward.", "chunks": [{"text": " Go forward.", "timestamp": (0.2, 1.1)}]}
    exec(compile(code, "docs/endpoints.md", "exec"), {"diarization_pipeline": two_speakers, "audio_bytes": speech_wav, "asr_outputs": asr_outputs})  # noqa: S102
    assert "'speaker': 'ALICE'" in capsys.readouterr().out
