"""pyannote community-1's WeSpeaker ResNet34 embedding, as an int8 ONNX-Runtime model, behind pyannote's ``Model``.

Its weights reach this project only inside ``moonshine-voice`` 0.1.0, int8-quantized in
ONNX-Runtime's ORT format (``models/moonshine_blobs.py`` cuts them out). The graph takes what
pyannote's ``WeSpeakerResNet34.forward`` computes before the network (Kaldi log-fbank features and a
weight per frame for the pooling), so this class is pyannote's ``BaseWeSpeakerResNet`` with the ResNet
replaced by an ONNX-Runtime session; pipelines, the live diarizer and enrolment call it as any
pyannote embedding model. The ORT bytes travel inside the checkpoint as a ``uint8`` buffer, so the
cache's damage check covers them. The session runs on CPU with as many threads as torch is told to
use when it is made, and its threads do not spin while they wait (docs/performance.md, Busy machines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pyannote.audio.models.embedding.wespeaker import BaseWeSpeakerResNet

from speaker_transcripts.models.pyannote_checkpoint import save_embedding_checkpoint

EMBEDDING_SIZE = 256


class OnnxWeSpeakerResNet34(BaseWeSpeakerResNet):
    """``(batch, 1, samples)`` (+ frame weights) -> ``(batch, 256)``, pyannote's fbank into an ORT graph."""

    def __init__(self, sample_rate: int = 16000, num_channels: int = 1, ort_bytes: int = 0, task: None = None) -> None:
        """``ort_bytes``: the size of the ORT model, so that a checkpoint's buffer can be loaded into place."""
        super().__init__(sample_rate=sample_rate, num_channels=num_channels, task=task)
        self.save_hyperparameters("ort_bytes")
        self.register_buffer("ort_model", torch.zeros(ort_bytes, dtype=torch.uint8))
        self._session: Any = None

    @property
    def dimension(self) -> int:
        return EMBEDDING_SIZE

    def session(self) -> Any:
        """The ONNX-Runtime session, made on first use from the buffer."""
        if self._session is None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = max(1, torch.get_num_threads())
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3  # errors only: its warnings are about graph internals, not the user's input
            self._session = onnxruntime.InferenceSession(
                self.ort_model.cpu().numpy().tobytes(), options, providers=["CPUExecutionProvider"]
            )
        return self._session

    def forward(self, waveforms: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """One embedding per waveform; ``weights`` (batch, frames), at any frame rate, weigh the
        pooling as pyannote's ``StatsPool`` does (nearest-neighbour onto the fbank frames)."""
        fbank = self.compute_fbank(waveforms.float().cpu())  # (batch, frames, 80)
        frames = fbank.shape[1]
        if weights is None:
            frame_weights = torch.ones(fbank.shape[0], frames)
        else:
            frame_weights = F.interpolate(weights.float().cpu()[:, None], size=frames, mode="nearest")[:, 0]
        (embeddings,) = self.session().run(
            None, {"fbank": fbank.numpy().astype(np.float32), "weights": frame_weights.numpy().astype(np.float32)}
        )
        return torch.from_numpy(embeddings).to(waveforms.device)


def save_pyannote_checkpoint(ort_model: bytes, destination: Path) -> None:
    """Write the ORT model as a checkpoint ``pyannote.audio.Model.from_pretrained`` loads (it
    imports this class by name), so the pipeline's ``config.yaml`` can point at it."""
    model = OnnxWeSpeakerResNet34(ort_bytes=len(ort_model))
    model.ort_model.copy_(torch.frombuffer(bytearray(ort_model), dtype=torch.uint8))
    save_embedding_checkpoint(model, destination)
