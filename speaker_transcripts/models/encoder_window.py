"""Whisper's encoder over a window sized to the audio instead of 30 s.

Whisper pads every input to 30 s of mel frames (3,000) and its encoder attends over all of them, so a
live decode of a 5-s turn pays for 25 s of padding. The encoder takes any length up to 1,500 positions
once the positional embedding is cut to match (whisper.cpp's ``audio_ctx``; CTranslate2 PR #1446): a
5-s clip's encoder pass fell from 1,492 to 134 ms with identical text (docs/performance.md, Live
sessions). A window shorter than the audio makes Whisper loop, so it always holds the audio plus
``MARGIN_S``.

transformers (5.24) checks that ``input_features`` hold exactly ``2 x max_source_positions`` frames;
within ``encoder_window`` the model's config says the window's positions and the positional embedding
is a view of its first rows, so generation and word alignment run unchanged. The model is shared: the
caller holds it exclusively meanwhile.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

MARGIN_S = 2.0  # audio-free frames kept after the audio: the window is never cut to the audio's edge
SHORTEST_S = 6.0  # below this Whisper loops on a second of speech (" No." decoded into a 2.7:1 repetition)
FRAMES_PER_S = 100  # Whisper's mel hop: 10 ms
# Windows come in whole steps of this many frames (1 s): a bounded set of input shapes. torch keeps
# state per shape (oneDNN's convolution primitives, up to 1,024 of them) and glibc keeps the heap that
# differently sized buffers freed, so windows sized in 20-ms steps made almost every live decode a new
# shape and a live session grew by about 0.3 GB over its first 30 minutes (issue 50, ``bench/memory/live_memory.py``).
# Measured, 120 encoder calls of whisper-base on one thread: sizes in 20-ms steps 999 -> 1,380 MB
# (1,247 MB after ``malloc_trim``), the same sizes rounded up to whole seconds flat at 1,128 MB.
# At most 25 window sizes (6..30 s) ever exist.
WINDOW_STEP_FRAMES = FRAMES_PER_S


def window_frames(seconds: float, full_frames: int, shortest_s: float = SHORTEST_S) -> int:
    """The mel frames a window for ``seconds`` of audio needs: the audio and the margin, at least
    ``shortest_s`` (never under ``SHORTEST_S``), rounded up to whole ``WINDOW_STEP_FRAMES`` (a bounded
    set of shapes; an even count, which the encoder's second convolution halves), never more than the
    full window. A longer shortest window costs encoder time and buys accuracy: Whisper learnt on
    30-s windows (a live turn's final decode, ``live/session.py``)."""
    frames = math.ceil(max(seconds + MARGIN_S, shortest_s, SHORTEST_S) * FRAMES_PER_S)
    return min(math.ceil(frames / WINDOW_STEP_FRAMES) * WINDOW_STEP_FRAMES, full_frames)


@contextmanager
def encoder_window(model: nn.Module, frames: int) -> Iterator[None]:
    """While inside, ``model`` (a ``WhisperForConditionalGeneration``) encodes ``frames`` mel frames
    (even, at most its full window) instead of the full window; its config and encoder are restored after."""
    config = model.config
    full_positions = config.max_source_positions
    positions = frames // 2
    if positions >= full_positions:
        yield
        return
    encoder = model.get_encoder()
    embedding = encoder.embed_positions
    encoder.embed_positions = nn.Embedding.from_pretrained(embedding.weight[:positions], freeze=True)
    config.max_source_positions = positions
    try:
        yield
    finally:
        config.max_source_positions = full_positions
        encoder.embed_positions = embedding
