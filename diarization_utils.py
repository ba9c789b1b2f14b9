"""The blog handler's diarization helpers, under its names and signatures, on the package's code.

``diarize(diarization_pipeline, file, parameters, asr_outputs)`` is what the blog's handler calls after
its ASR pipeline: decode the file (``preprocess_inputs``), run pyannote on it (``diarize_audio``), give
each ASR chunk its speaker (``post_process_segments_and_transcripts``). Each step is a call into
``speaker_transcripts``: decoding is ``pipeline.audio`` (any container, any rate, 16 kHz mono), the
diarization is ``pipeline.diarization.diarize`` (slivers dropped, labels in order of appearance) and the
merge is its word-level ``word_speakers`` (docs/design.md), not the blog's nearest-end rule, so no chunk
is dropped after the last turn. The product itself runs ``Transcriber`` (``handler.py``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

if importlib.util.find_spec("speaker_transcripts") is None:  # a clone as Inference Endpoints lays it out
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from speaker_transcripts.config import InferenceConfig  # noqa: E402
from speaker_transcripts.pipeline import diarization  # noqa: E402
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_inputs  # noqa: E402
from speaker_transcripts.pipeline.samples import as_float32  # noqa: E402
from speaker_transcripts.pipeline.transcript import close_timestamps  # noqa: E402

__all__ = ["diarize", "diarize_audio", "post_process_segments_and_transcripts", "preprocess_inputs"]


def preprocess_inputs(inputs: Any, sampling_rate: int = SAMPLING_RATE) -> tuple[np.ndarray, Any]:
    """Audio as the blog's handler receives it (file bytes, base64, or ``{"array"|"raw", "sampling_rate"}``)
    decoded to 16 kHz mono: the float32 samples, and the ``(1, n)`` tensor pyannote takes."""
    import torch

    samples = as_float32(decode_inputs(inputs, sampling_rate).samples)
    return samples, torch.from_numpy(samples).unsqueeze(0)


def _config(parameters: InferenceConfig | Mapping[str, Any] | None) -> InferenceConfig:
    return parameters if isinstance(parameters, InferenceConfig) else InferenceConfig.model_validate(dict(parameters or {}))


def diarize_audio(diarizer_inputs: Any, diarization_pipeline: Any, parameters: InferenceConfig | Mapping[str, Any]) -> list[dict]:
    """Who spoke when: ``[{"segment": {"start", "end"}, "speaker"}, ...]``, one speaker at a time, in order.
    Only the speaker-count hints the request sets (``num_speakers``, ``min_speakers``, ``max_speakers``) reach
    the pipeline."""
    config = _config(parameters)
    hints = {name: getattr(config, name) for name in ("num_speakers", "min_speakers", "max_speakers") if getattr(config, name)}
    samples = np.asarray(diarizer_inputs.numpy() if hasattr(diarizer_inputs, "numpy") else diarizer_inputs, dtype=np.float32).reshape(-1)
    found = diarization.diarize(diarization_pipeline, samples, SAMPLING_RATE, hints)
    return [{"segment": {"start": turn.start, "end": turn.end}, "speaker": turn.speaker} for turn in found.turns]


def post_process_segments_and_transcripts(
    new_segments: Sequence[Mapping[str, Any]], transcript: Sequence[Mapping[str, Any]], group_by_speaker: bool = True
) -> list[dict]:
    """The ASR chunks (``{"text", "timestamp": (start, end)}``) with their speakers: each chunk by its own time,
    read as a sequence (``diarization.word_speakers``); a chunk is never dropped or repeated. With
    ``group_by_speaker``, neighbouring chunks of one speaker are joined into sentence-sized segments;
    without, each chunk comes back with its ``speaker``."""
    turns = [diarization.Turn(str(s["speaker"]), float(s["segment"]["start"]), float(s["segment"]["end"])) for s in new_segments]
    ends = [float(t) for chunk in transcript for t in chunk["timestamp"] if t is not None] + [turn.end for turn in turns]
    chunks = close_timestamps(transcript, max(ends, default=0.0))
    speakers = diarization.word_speakers(chunks, turns)
    if group_by_speaker:
        return [segment.to_dict() for segment in diarization.group_by_speaker(chunks, speakers)]
    return [{"speaker": speaker, "text": chunk.text, "timestamp": (chunk.start, chunk.end)} for chunk, speaker in zip(chunks, speakers, strict=True)]


def diarize(diarization_pipeline: Any, file: Any, parameters: InferenceConfig | Mapping[str, Any], asr_outputs: Mapping[str, Any]) -> list[dict]:
    """The blog's entry: the speaker of every chunk of ``asr_outputs`` (a transformers ASR pipeline's
    answer with ``return_timestamps``), from ``diarization_pipeline`` run on ``file``."""
    _, diarizer_inputs = preprocess_inputs(file, _config(parameters).sampling_rate)
    segments = diarize_audio(diarizer_inputs, diarization_pipeline, parameters)
    return post_process_segments_and_transcripts(segments, asr_outputs["chunks"], group_by_speaker=False)
