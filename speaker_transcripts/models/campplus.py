"""CAM++ speaker embeddings (3D-Speaker, Apache-2.0) behind pyannote's ``Model`` interface.

The embedded diarization pipeline pairs pyannote's trained segmentation-3.0 with the trained
CAM++ network ``campplus_cn_en_common.pt`` (192-d embeddings, 200k+ Chinese and English
speakers). pyannote's ``SpeakerDiarization`` asks its embedding model for one embedding per
(10-s chunk, local speaker), passing the chunk's waveform and that speaker's frame mask, so this
class implements ``forward(waveforms, weights)``:

1. Kaldi fbank features (80 mel bins, povey window, no dither), mean removed, as 3D-Speaker
   computes them in training;
2. the CAM++ network (3D-Speaker's definition; the last batch norm has no ReLU after it,
   unlike some copies): frame-level layers, statistics pooling, the dense embedding layer.

With a mask, the network runs on the samples under the mask, cut out and joined, rather than
on the whole chunk with the mask applied at the pooling (what pyannote's own WeSpeaker model
does): CAM++'s context-aware layers average over their whole input, so the other voices in the
chunk leak into every speaker's embedding. On the AMI excerpts that leak cost a point of DER
(README). Speakers with under half a second of their own fall back to masked pooling.

Cost, which sets the pace of diarization on CPU: a local speaker with no
frame at all (a third to a half of the pairs in a conversation) is answered without running the
network, with exactly the embedding masked pooling gives it; and on CPUs with bfloat16
instructions the frame-level network runs under bfloat16 autocast. Together 7.9 -> 4.2 s on the
59-s conversation (ad-hoc before/after timing; ``bench/cpu_speed.py`` times the result); ``bench/tune_diarization.py --steps 0.25 --shipped`` gives the same DER on
each of the 14 files with and without bfloat16.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import torch
import torch.nn.functional as F
from pyannote.audio import Model
from pyannote.audio.core.task import Problem, Resolution, Specifications
from pyannote.audio.models.blocks.pooling import StatsPool
from torch import nn

from speaker_transcripts.models.cpu_fast_path import bfloat16_supported

FBANK_BINS = 80
EMBEDDING_SIZE = 192
CHUNK_SECONDS = 10.0  # what segmentation-3.0 hands over per call
MIN_OWN_SAMPLES = 8000  # half a second of a speaker's own speech makes a usable embedding


def _batch_norm_relu(channels: int) -> nn.Sequential:
    return nn.Sequential(OrderedDict([("batchnorm", nn.BatchNorm1d(channels)), ("relu", nn.ReLU(inplace=True))]))


class _ResidualBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=(stride, 1), bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + self.shortcut(x))


class _FrontConvolution(nn.Module):
    """CAM++'s 2-D convolutional head (FCM): fbank (B, 80, T) -> (B, 32 * 10, T)."""

    def __init__(self, channels: int = 32, feature_bins: int = FBANK_BINS) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.layer1 = nn.Sequential(_ResidualBlock(channels, channels, 2), _ResidualBlock(channels, channels, 1))
        self.layer2 = nn.Sequential(_ResidualBlock(channels, channels, 2), _ResidualBlock(channels, channels, 1))
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.out_channels = channels * (feature_bins // 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x.unsqueeze(1))))
        out = F.relu(self.bn2(self.conv2(self.layer2(self.layer1(out)))))
        return out.reshape(out.shape[0], out.shape[1] * out.shape[2], out.shape[3])


class _TimeDelay(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2, bias=False)
        self.nonlinear = _batch_norm_relu(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x))


class _ContextAwareMask(nn.Module):
    """CAM: a local convolution gated by the mean of the utterance and of 100-frame segments."""

    SEGMENT_FRAMES = 100

    def __init__(self, channels: int, out_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        padding = (kernel_size - 1) // 2 * dilation
        self.linear_local = nn.Conv1d(channels, out_channels, kernel_size, padding=padding, dilation=dilation, bias=False)
        self.linear1 = nn.Conv1d(channels, channels // 2, 1)
        self.relu = nn.ReLU(inplace=True)
        self.linear2 = nn.Conv1d(channels // 2, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        segments = F.avg_pool1d(x, kernel_size=self.SEGMENT_FRAMES, stride=self.SEGMENT_FRAMES, ceil_mode=True)
        segments = segments.repeat_interleave(self.SEGMENT_FRAMES, dim=-1)[..., : x.shape[-1]]
        context = x.mean(-1, keepdim=True) + segments
        return self.linear_local(x) * torch.sigmoid(self.linear2(self.relu(self.linear1(context))))


class _DenseTimeDelay(nn.Module):
    def __init__(self, in_channels: int, growth: int, bottleneck: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.nonlinear1 = _batch_norm_relu(in_channels)
        self.linear1 = nn.Conv1d(in_channels, bottleneck, 1, bias=False)
        self.nonlinear2 = _batch_norm_relu(bottleneck)
        self.cam_layer = _ContextAwareMask(bottleneck, growth, kernel_size, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class _DenseBlock(nn.Module):
    """Densely connected layers: each one sees the block input and every earlier layer's output."""

    def __init__(self, layers: int, in_channels: int, growth: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        for index in range(layers):  # named as in the checkpoint: tdnnd1, tdnnd2, ...
            layer = _DenseTimeDelay(in_channels + index * growth, growth, 4 * growth, kernel_size, dilation)
            self.add_module(f"tdnnd{index + 1}", layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.children():
            x = torch.cat([x, layer(x)], dim=1)
        return x


class _Transition(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.nonlinear = _batch_norm_relu(in_channels)
        self.linear = nn.Conv1d(in_channels, out_channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.nonlinear(x))


class _Dense(nn.Module):
    """The embedding layer: 1x1 convolution, then a batch norm without affine terms (no ReLU)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        self.nonlinear = nn.Sequential(OrderedDict([("batchnorm", nn.BatchNorm1d(out_channels, affine=False))]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x.unsqueeze(-1)).squeeze(-1))


class CamPlusPlus(Model):
    """CAM++ as a pyannote embedding model: ``(batch, 1, samples)`` + masks -> ``(batch, 192)``."""

    def __init__(
        self, sample_rate: int = 16000, num_channels: int = 1, task: None = None, embedding_size: int = EMBEDDING_SIZE
    ) -> None:
        super().__init__(sample_rate=sample_rate, num_channels=num_channels, task=task)
        self.save_hyperparameters("embedding_size")
        self.head = _FrontConvolution()
        channels, layers = 128, OrderedDict([("tdnn", _TimeDelay(self.head.out_channels, 128, 5, stride=2))])
        for index, (depth, dilation) in enumerate(((12, 1), (24, 2), (16, 2)), start=1):
            layers[f"block{index}"] = _DenseBlock(depth, channels, 32, 3, dilation)
            channels += depth * 32
            layers[f"transit{index}"] = _Transition(channels, channels // 2)
            channels //= 2
        layers["out_nonlinear"] = _batch_norm_relu(channels)
        self.xvector = nn.Sequential(layers)
        self.pooling = StatsPool()
        self.dense = _Dense(channels * 2, embedding_size)
        # pyannote asks for every (chunk, local speaker) pair, silent ones included (a third to a half
        # of them in conversations); masked pooling over no frame is all zeros, whatever the frames.
        self.register_buffer("_silent_statistics", torch.zeros(1, channels * 2), persistent=False)

    @property
    def dimension(self) -> int:
        return self.hparams.embedding_size

    def fbank(self, waveforms: torch.Tensor) -> torch.Tensor:
        """(batch, 1, samples) -> (batch, frames, 80), each chunk's mean removed."""
        from torchaudio.compliance.kaldi import fbank

        features = torch.stack([
            fbank(waveform, num_mel_bins=FBANK_BINS, sample_frequency=self.hparams.sample_rate, dither=0.0)
            for waveform in waveforms.float()
        ])
        return features - features.mean(dim=1, keepdim=True)

    def forward_frames(self, waveforms: torch.Tensor) -> torch.Tensor:
        """Frame-level features (batch, 512, frames) before pooling; refuses input too short to
        give two frames (pyannote probes for the shortest input the model takes this way)."""
        features = self.fbank(waveforms).transpose(1, 2)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=features.device.type == "cpu" and bfloat16_supported()):
            frames = self.xvector(self.head(features)).float()
        if frames.shape[-1] < 2:
            raise ValueError(f"{waveforms.shape[-1]} samples are too few for a CAM++ embedding")
        return frames

    def forward(self, waveforms: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """One embedding per waveform; with ``weights`` (a frame mask per waveform), of the
        samples the mask marks as the speaker's own, cut out and joined."""
        if weights is None:
            return self.dense(self.pooling(self.forward_frames(waveforms)))
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
                embeddings.append(self.dense(self.pooling(self.forward_frames(own[None]))))
        return torch.cat(embeddings)


def _masked_samples(waveform: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The samples of ``waveform`` (1, samples) under the frames where ``mask`` is over 0.5."""
    samples = waveform.shape[-1]
    per_sample = F.interpolate(mask[None, None].float(), size=samples, mode="nearest")[0, 0] > 0.5
    return waveform[:, per_sample]


def save_pyannote_checkpoint(campplus_weights: Path, destination: Path) -> None:
    """Write 3D-Speaker's CAM++ state dict as a checkpoint ``pyannote.audio.Model.from_pretrained``
    loads (it imports this class by name), so the pipeline's ``config.yaml`` can point at it."""
    import lightning

    state = torch.load(campplus_weights, map_location="cpu", weights_only=True)
    renamed = {key.replace("xvector.dense.", "dense.", 1): value for key, value in state.items()}
    model = CamPlusPlus()
    model.load_state_dict(renamed, strict=True)
    model.specifications = Specifications(
        problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=CHUNK_SECONDS
    )
    checkpoint = {
        "state_dict": model.state_dict(),
        "hyper_parameters": dict(model.hparams),
        "pytorch-lightning_version": lightning.__version__,
    }
    model.on_save_checkpoint(checkpoint)
    destination.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, destination)
