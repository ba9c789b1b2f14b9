"""An embedding model saved as the checkpoint ``pyannote.audio.Model.from_pretrained`` loads.

pyannote finds the model's class by the name recorded in the checkpoint and rebuilds it from its
hyper-parameters, so an embedded pipeline folder's ``embedding/pytorch_model.bin`` loads offline
like any Hub model. CAM++ (``campplus.py``) and community-1's WeSpeaker (``wespeaker_onnx.py``)
are both written this way.
"""

from __future__ import annotations

from pathlib import Path

import torch
from pyannote.audio import Model
from pyannote.audio.core.task import Problem, Resolution, Specifications

CHUNK_SECONDS = 10.0  # what segmentation-3.0 hands the embedding model per call


def save_embedding_checkpoint(model: Model, destination: Path) -> None:
    """Write ``model`` (its weights and buffers as loaded) with a speaker-embedding specification."""
    import lightning

    model.specifications = Specifications(problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=CHUNK_SECONDS)
    checkpoint = {
        "state_dict": model.state_dict(),
        "hyper_parameters": dict(model.hparams),
        "pytorch-lightning_version": lightning.__version__,
    }
    model.on_save_checkpoint(checkpoint)
    destination.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, destination)
