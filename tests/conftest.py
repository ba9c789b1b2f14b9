"""Shared fixtures: tiny random models built once per session, and a clean environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Set before torch loads OpenMP: with its default (active) wait policy, idle OpenMP threads spin,
# and two busy torch processes on 2 cores slow each other down: test_transcriber.py beside test_asr.py +
# test_evaluate.py took 42 s together, 26 s with PASSIVE (alone: 20 s). A machine running anything
# else while the suite runs gets the same protection; subprocesses the tests start inherit it.
# Repeat: run `pytest tests/pipeline/test_transcriber.py` and `pytest tests/pipeline/test_asr.py tests/evaluation/test_evaluate.py` at
# once, with OMP_WAIT_POLICY=ACTIVE and then PASSIVE.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Nothing in the suite may reach the Hub, and pyannote must not phone home.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")

# A local Ray (the batch tests) listens on loopback only, as the batch command's own does
# (batch/job.py: start_ray), whichever test imports Ray first.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

# WebRTC calls (the page's Record, the aiortc tests) receive media on loopback only: no test's packet
# goes to an address of another interface.
os.environ["WEBRTC_HOSTS"] = "127.0.0.1"

DATA = Path(__file__).resolve().parent / "data"
SETTINGS_ENV = (
    "ASR_MODEL", "ASSISTANT_MODEL", "DIARIZATION_MODEL", "HF_TOKEN", "DEVICE", "DTYPE", "SPEECH_GATE", "WARMUP",
    "MAX_AUDIO_SECONDS", "ASSISTED_MAX_SECONDS", "API_KEY", "MAX_UPLOAD_MB", "MAX_QUEUE", "MAX_QUEUED_MB", "REQUEST_TIMEOUT_S", "MAX_BATCH_ITEMS",
    "HF_MODEL_DIR",
)


@pytest.fixture(autouse=True)
def clean_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without the endpoint's env vars, whatever the developer's shell has, and
    with the CLI's and server's embedded diarization default off (``DIARIZATION_MODEL=none``):
    only the tests that ask for real weights (test_embedded_real.py) load them."""
    for name in SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DIARIZATION_MODEL", "none")


@pytest.fixture(scope="session")
def speech_wav() -> bytes:
    """2.8 s of real read speech (pocketsphinx test data, BSD-2-Clause: tests/data/LICENSE.pocketsphinx)."""
    return (DATA / "goforward.wav").read_bytes()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import tiny_models as builders

    root = tmp_path_factory.mktemp("tiny-models")
    main = builders.build_whisper(root / "whisper")
    return {
        "whisper": main,
        "whisper_en": builders.build_whisper(root / "whisper-en", multilingual=False),
        "assistant": builders.build_assistant(main, root / "assistant", causal=False),
        "assistant_causal": builders.build_assistant(main, root / "assistant-causal", causal=True),
    }


@pytest.fixture(scope="session")
def tiny_pyannote(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tiny_models as builders

    return builders.build_pyannote_pipeline(tmp_path_factory.mktemp("tiny-pyannote"))


def two_speakers(audio, **hints):
    """Stand-in for pyannote: ALICE for the first 1.4 s, BOB after (the speech clip is 2.8 s)."""
    from pyannote.core import Annotation, Segment

    annotation = Annotation()
    annotation[Segment(0.0, 1.4)] = "ALICE"
    annotation[Segment(1.4, 3.0)] = "BOB"
    return annotation


@pytest.fixture(scope="session")
def served_handler(tiny_models):
    """Tiny Whisper + assistant, with the two-speaker stand-in in the diarization seam."""
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.transcriber import Transcriber

    loaded = Transcriber(
        settings=ModelSettings(asr_model=str(tiny_models["whisper"]), assistant_model=str(tiny_models["assistant"]))
    )
    loaded.diarization_pipeline = two_speakers
    return loaded


@pytest.fixture(scope="session")
def server_url(served_handler):
    """The real server on Uvicorn, 127.0.0.1, a free port; 1 MB upload limit."""
    from servers import serving

    from speaker_transcripts.config import ServerSettings
    from speaker_transcripts.server.app import create_app

    with serving(create_app(lambda: served_handler, ServerSettings(max_upload_mb=1))) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def live_handler(tiny_models, tiny_pyannote):
    """Tiny English Whisper and the tiny pyannote pipeline (random weights): a live session's whole
    path runs, with nonsense words and arbitrary speakers."""
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.transcriber import Transcriber

    return Transcriber(settings=ModelSettings(asr_model=str(tiny_models["whisper_en"]), diarization_model=str(tiny_pyannote)))
