"""CAM++ speaker embeddings (3D-Speaker, Apache-2.0) behind pyannote's ``Model`` interface.

The embedded diarization pipeline pairs pyannote's segmentation-3.0 with the trained CAM++ network
``campplus_cn_en_common.pt`` (192-d). pyannote asks its embedding model for one embedding per (10-s
chunk, local speaker), passing the chunk and that speaker's frame mask, so this class implements
``forward(waveforms, weights)`` around ``campplus_network.py``, which enrolment loads without pyannote.

With a mask, the network runs on the samples under the mask, cut out and joined, not on the whole
chunk with the mask applied at pooling (pyannote's WeSpeaker way): CAM++'s context-aware layers
average over their whole input, so other voices would leak into every speaker's embedding (a point
of DER on AMI). Speakers with under half a second of their own fall back to masked pooling. A local
speaker with no frame is answered without running the network, and on CPUs with bfloat16 the
frame-level network runs under bfloat16 autocast (docs/performance.md, CPU speed).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from pyannote.audio import Model
from pyannote.audio.models.blocks.pooling import StatsPool

from speaker_transcripts.models.campplus_network import EMBEDDING_SIZE, frame_features, new_layers, statistics
from speaker_transcripts.models.pyannote_checkpoint import save_embedding_checkpoint

MIN_OWN_SAMPLES = 8000  # half a second of a speaker's own speech makes a usable embedding


class CamPlusPlus(Model):
    """CAM++ as a pyannote embedding model: ``(batch, 1, samples)`` + masks -> ``(batch, 192)``."""

    def __init__(
        self, sample_rate: int = 16000, num_channels: int = 1, task: None = None, embedding_size: int = EMBEDDING_SIZE
    ) -> None:
        super().__init__(sample_rate=sample_rate, num_channels=num_channels, task=task)
        self.save_hyperparameters("embedding_size")
        self.head, self.xvector, self.dense, pooled_size = new_layers(embedding_size)  # the network: campplus_network.py
        self.pooling = StatsPool()
        # pyannote asks for every (chunk, local speaker) pair, silent ones included (a third to a half
        # of them in conversations); masked pooling over no frame is all zeros, whatever the frames.
        self.register_buffer("_silent_statistics", torch.zeros(1, pooled_size), persistent=False)

    @property
    def dimension(self) -> int:
        return self.hparams.embedding_size

    def forward_frames(self, waveforms: torch.Tensor) -> torch.Tensor:
        """Frame-level features (batch, 512, frames) before pooling."""
        return frame_features(self.head, self.xvector, waveforms, self.hparams.sample_rate)

    def forward(self, waveforms: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """One embedding per waveform; with ``weights`` (a frame mask per waveform), of the
        samples the mask marks as the speaker's own, cut out and joined."""
        if weights is None:
            return self.dense(statistics(self.forward_frames(waveforms)))
        embeddings = []
        for waveform, mask in zip(waveforms, weights, strict=True):
            if not mask.any():  # a silent local speaker: pooling over no frame gives zero statistics
                embeddings.append(self.dense(self._silent_statistics))
                continue
            own = _masked_samples(waveform, mask)
            if own.shape[-1] < MIN_OWN_SAMPLES:  # too little to embed on its own: pool over the chunk
                frames = self.forward_frames(waveform[None])
                embeddings.append(self.dense(self.pooling(frames, weights=mask[None])))
            else:
                embeddings.append(self.dense(statistics(self.forward_frames(own[None]))))
        return torch.cat(embeddings)


def _masked_samples(waveform: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The samples of ``waveform`` (1, samples) under the frames where ``mask`` is over 0.5."""
    samples = waveform.shape[-1]
    per_sample = F.interpolate(mask[None, None].float(), size=samples, mode="nearest")[0, 0] > 0.5
    return waveform[:, per_sample]


def save_pyannote_checkpoint(campplus_weights: Path, destination: Path) -> None:
    """Write 3D-Speaker's CAM++ state dict as a checkpoint ``pyannote.audio.Model.from_pretrained``
    loads (it imports this class by name), so the pipeline's ``config.yaml`` can point at it."""
    state = torch.load(campplus_weights, map_location="cpu", weights_only=True)
    renamed = {key.replace("xvector.dense.", "dense.", 1): value for key, value in state.items()}
    model = CamPlusPlus()
    model.load_state_dict(renamed, strict=True)
    save_embedding_checkpoint(model, destination)
