"""The CAM++ speaker-embedding network (3D-Speaker, Apache-2.0) in plain PyTorch, and loading it
from the embedded pipeline's checkpoint without pyannote.

pyannote's ``Model`` wrapper (``campplus.py``) is what the diarization pipeline runs; enrolling a
voice (``speaker-transcripts speakers add``) needs only the network on whole clips. Importing
pyannote.audio imports Lightning, which took 8 of the 16.6 s one enrolment took beside busy
processes, so the layers, the features and the pooling live here, shared by both, and
``load_voice_embedder`` reads the same checkpoint file with stand-ins for the three pyannote
classes it pickles: the same weights give the same embeddings, with or without pyannote.

The network: Kaldi fbank features (80 mel bins, povey window, no dither), mean removed, as
3D-Speaker computes them in training; frame-level layers (the last batch norm has no ReLU after
it, unlike some copies); statistics pooling; the dense embedding layer.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from speaker_transcripts.models.cpu_fast_path import bfloat16_supported

FBANK_BINS = 80
EMBEDDING_SIZE = 192
SAMPLE_RATE = 16000


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


class Layers(NamedTuple):
    """CAM++'s trained parts, named as in the checkpoint (``head.*``, ``xvector.*``, ``dense.*``)."""

    head: _FrontConvolution
    xvector: nn.Sequential
    dense: _Dense
    pooled_size: int  # the statistics' size: mean and deviation of each frame-level channel


def new_layers(embedding_size: int = EMBEDDING_SIZE) -> Layers:
    """CAM++'s layers as 3D-Speaker builds them (untrained)."""
    head = _FrontConvolution()
    channels, layers = 128, OrderedDict([("tdnn", _TimeDelay(head.out_channels, 128, 5, stride=2))])
    for index, (depth, dilation) in enumerate(((12, 1), (24, 2), (16, 2)), start=1):
        layers[f"block{index}"] = _DenseBlock(depth, channels, 32, 3, dilation)
        channels += depth * 32
        layers[f"transit{index}"] = _Transition(channels, channels // 2)
        channels //= 2
    layers["out_nonlinear"] = _batch_norm_relu(channels)
    return Layers(head, nn.Sequential(layers), _Dense(channels * 2, embedding_size), channels * 2)


def fbank(waveforms: torch.Tensor, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """(batch, 1, samples) -> (batch, frames, 80), each chunk's mean removed."""
    from torchaudio.compliance.kaldi import fbank as kaldi_fbank

    features = torch.stack([
        kaldi_fbank(waveform, num_mel_bins=FBANK_BINS, sample_frequency=sample_rate, dither=0.0)
        for waveform in waveforms.float()
    ])
    return features - features.mean(dim=1, keepdim=True)


def frame_features(head: nn.Module, xvector: nn.Module, waveforms: torch.Tensor, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """Frame-level features (batch, 512, frames) before pooling, under bfloat16 autocast on CPUs
    with bfloat16 instructions; refuses input too short to give two frames (pyannote probes for
    the shortest input the model takes this way)."""
    features = fbank(waveforms, sample_rate).transpose(1, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=features.device.type == "cpu" and bfloat16_supported()):
        frames = xvector(head(features)).float()
    if frames.shape[-1] < 2:
        raise ValueError(f"{waveforms.shape[-1]} samples are too few for a CAM++ embedding")
    return frames


def statistics(frames: torch.Tensor) -> torch.Tensor:
    """Mean and unbiased standard deviation over the frames, concatenated (pyannote's ``StatsPool``
    without weights)."""
    return torch.cat([frames.mean(dim=-1), frames.std(dim=-1, correction=1)], dim=-1)


class VoiceEmbedder(nn.Module):
    """CAM++ on whole clips: ``(batch, 1, samples)`` at 16 kHz -> ``(batch, 192)``, as the
    pipeline's model embeds a waveform given without a mask."""

    def __init__(self, embedding_size: int = EMBEDDING_SIZE) -> None:
        super().__init__()
        self.head, self.xvector, self.dense, _ = new_layers(embedding_size)

    def forward(self, waveforms: torch.Tensor) -> torch.Tensor:
        return self.dense(statistics(frame_features(self.head, self.xvector, waveforms)))


class _Stand:
    """Stands in for pyannote's ``Specifications`` when the checkpoint is read without pyannote:
    what it says is the task the model was saved for, not needed to embed."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def _enum_value(value: Any) -> Any:
    """Stands in for pyannote's ``Problem`` and ``Resolution`` enums: their values are enough."""
    return value


PYANNOTE_ARCHITECTURE = {"module": "speaker_transcripts.models.campplus", "class": "CamPlusPlus"}


def load_voice_embedder(checkpoint: Path) -> VoiceEmbedder | None:
    """The CAM++ network of a pyannote checkpoint written by ``campplus.save_pyannote_checkpoint``,
    on CPU in eval mode, or None when the checkpoint holds another architecture. Read weights-only:
    pyannote's three classes are met by stand-ins and nothing else in the file may run."""
    stand_ins = [(_Stand, "pyannote.audio.core.task.Specifications"),
                 (_enum_value, "pyannote.audio.core.task.Problem"), (_enum_value, "pyannote.audio.core.task.Resolution")]
    with torch.serialization.safe_globals(stand_ins):
        saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    if saved.get("pyannote.audio", {}).get("architecture") != PYANNOTE_ARCHITECTURE:
        return None
    embedder = VoiceEmbedder(saved["hyper_parameters"].get("embedding_size", EMBEDDING_SIZE))
    embedder.load_state_dict(saved["state_dict"], strict=True)
    return embedder.eval()
