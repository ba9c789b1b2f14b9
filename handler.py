"""Inference Endpoints custom handler: the platform's entry, and nothing else.

Inference Endpoints installs ``requirements.txt``, imports ``EndpointHandler`` from this file in
the repository root, builds it once with the repository path, and calls it per request with the
parsed body (``{"inputs": ..., "parameters": {...}}``). The work is the package's orchestrator
(``speaker_transcripts.pipeline.transcriber.Transcriber``); this class only turns the platform's
contract into its settings. The platform does not install the package, so the repository itself
goes on the import path when the package is not already importable.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

if importlib.util.find_spec("speaker_transcripts") is None:  # the clone as Endpoints lays it out
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from speaker_transcripts.config import ModelSettings
from speaker_transcripts.pipeline.transcriber import Transcriber


class EndpointHandler:
    """Loads the models the environment names (``ASR_MODEL``, ``DIARIZATION_MODEL``, ...), or a
    Whisper checkpoint in the repository itself, once; answers each request with the transcript."""

    def __init__(self, path: str = "") -> None:
        self.transcriber = Transcriber(ModelSettings.for_repository(path))

    def __call__(self, data: Any) -> dict[str, Any]:
        """One request: ``InvalidRequestError`` (a ``ValueError``) for what the client can fix."""
        return self.transcriber(data)
