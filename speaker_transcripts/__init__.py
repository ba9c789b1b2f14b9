"""Speaker-attributed transcription: Whisper (+ an assistant for speculative decoding) and
pyannote diarization, merged word by word, behind Inference Endpoints, a server, a CLI.

The folders are the architecture, from the bottom up (docs/design.md, Layout): ``config`` and
``errors``; ``models/``; ``pipeline/`` with the orchestrator ``pipeline.transcriber.Transcriber``;
``live/``; ``output/``; ``server/``; ``batch/``; ``cli/``; ``evaluation/``. Nothing imports upward,
and importing a module loads torch only where the module itself needs it.

    from speaker_transcripts import ModelSettings, Transcriber

    transcriber = Transcriber(ModelSettings.self_hosted())
    result = transcriber({"inputs": open("meeting.wav", "rb").read(), "parameters": {"num_speakers": 2}})
"""

from __future__ import annotations

import logging
import os
import sys
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.transcriber import Transcriber

__all__ = ["ModelSettings", "Transcriber", "__version__"]

# OpenMP's default (active) wait policy spins idle threads for a while before they sleep: with
# another process on the same cores, pyannote and torch ran 10-15x slower (bench/speed/busy_machine.py).
# libgomp reads the policy once, when torch loads it, so it is set here, before any module of the
# package imports torch; a policy the user set is kept, and a process that loaded torch first keeps its own.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Triton compiles GPU kernels, and torch._dynamo (which transformers' Whisper imports) loads it
# whenever it is installed, as it is beside PyPI's torch: 75 MB of resident memory in every process
# (measured: 741 -> 666 MB after importing torch and transformers' Whisper). On a machine with no GPU device it can never run, so it is marked absent
# before torch loads (torch then treats it as not installed); a process that loaded torch first
# keeps its own.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")  # NVIDIA, AMD ROCm, WSL's GPU
if "torch" not in sys.modules and not any(os.path.exists(node) for node in GPU_DEVICE_NODES):
    sys.modules.setdefault("triton", None)
    # torch's flop counter (which pyannote's imports load) warns of a missing Triton in a CUDA build: left out on purpose
    logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)

try:
    __version__ = metadata.version("speaker-transcripts")
except metadata.PackageNotFoundError:  # run from a clone that was not installed (Inference Endpoints)
    __version__ = "0+unknown"

_LAZY = {"ModelSettings": "speaker_transcripts.config", "Transcriber": "speaker_transcripts.pipeline.transcriber"}


def __getattr__(name: str) -> Any:
    """``from speaker_transcripts import Transcriber`` without importing the pipeline on ``import speaker_transcripts``."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'speaker_transcripts' has no attribute {name!r}")
