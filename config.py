"""The blog handler's settings module, as a door into the package (``speaker_transcripts.config``).

A fork of the blog's handler opens ``config.py`` for ``ModelSettings`` (which models load, from the
environment) and ``InferenceConfig`` (one request's ``parameters``). Both are the package's own classes,
with every validation rule; the variables they read are listed in docs/configuration.md.
``model_settings`` is the blog's module-level instance, built on first use, not at import, so the
environment can be set first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

if importlib.util.find_spec("speaker_transcripts") is None:  # a clone as Inference Endpoints lays it out
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from speaker_transcripts.config import InferenceConfig, ModelSettings, ServerSettings  # noqa: E402

__all__ = ["InferenceConfig", "ModelSettings", "ServerSettings", "model_settings"]


def __getattr__(name: str) -> Any:
    """``config.model_settings`` (and ``from config import model_settings``): the environment's
    ``ModelSettings``, read the first time it is asked for."""
    if name == "model_settings":
        settings = ModelSettings()
        globals()["model_settings"] = settings
        return settings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
