"""WAV files written without the decoder under test: PCM16 through the standard library, and
IEEE float by hand (the only common format that can carry NaN)."""

from __future__ import annotations

import io
import wave

import numpy as np


def pcm_wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    """PCM16 WAV; ``samples`` is (n,) or (channels, n), floats in [-1, 1] (clipped)."""
    frames = np.atleast_2d(samples)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(frames.shape[0])
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes((np.clip(frames.T, -1, 1) * 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def float_wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    """Mono IEEE-float WAV (format 3)."""
    data = np.asarray(samples).astype("<f4").tobytes()
    header = b"fmt " + (16).to_bytes(4, "little") + (3).to_bytes(2, "little") + (1).to_bytes(2, "little")
    header += rate.to_bytes(4, "little") + (rate * 4).to_bytes(4, "little") + (4).to_bytes(2, "little") + (32).to_bytes(2, "little")
    body = b"WAVE" + header + b"data" + len(data).to_bytes(4, "little") + data
    return b"RIFF" + len(body).to_bytes(4, "little") + body
