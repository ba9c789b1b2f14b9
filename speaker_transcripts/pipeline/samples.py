"""How a request's samples are held: 16-bit, as a recorder writes them; float32 where a model takes them.

The samples live through the whole request beside every model, and on a 3-hour file they were 691 MB of
float32 in a 2.8-GiB peak (issue 50). Held as 16-bit integers they take half, and a 16-bit recording,
the usual case, is held exactly: ``as_float32`` gives back the very float32 values its decoder gave
(``x / 32768``), so Whisper, pyannote and the speech gate hear what they heard before, bit for bit. A
float source (mp3, opus, a client's float array) is rounded to 16 bits as a 16-bit export of it would
be. Each stage turns only the stretch it works on into float32: a piece for Whisper, a batch of windows
for the speech gate and pyannote. numpy only: testable without torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

STORED = np.int16
STEP = 2.0**-15  # one 16-bit step in float samples (full scale is 1.0)
_TOP = 1.0 - STEP  # the loudest positive sample 16 bits hold


def stored(samples: np.ndarray) -> np.ndarray:
    """Float samples (full scale 1.0) as 16-bit, rounded, past full scale clipped; 16-bit samples as
    they are (no copy when contiguous). Callers refuse NaN and infinity before."""
    if samples.dtype == STORED:
        return np.ascontiguousarray(samples)
    return np.rint(np.clip(samples, -1.0, _TOP) / STEP).astype(STORED)


def as_float32(samples: np.ndarray) -> np.ndarray:
    """``samples`` as float32 at full scale 1.0: 16-bit ones scaled (exactly: every 16-bit value
    times 2**-15 is a float32), float32 ones (a live session's) returned as they are, without a copy."""
    if samples.dtype == STORED:
        scaled = samples.astype(np.float32)
        scaled *= np.float32(STEP)
        return scaled
    return np.asarray(samples, dtype=np.float32)


def as_float32_tensor(waveforms: Any) -> Any:
    """A torch tensor of samples as float32 at full scale 1.0: a floating one cast, an integer one
    (a request's 16-bit samples) scaled; the same rule as ``as_float32``, for the stages that slide
    over the samples as a tensor (speech gate, pyannote)."""
    return waveforms.float() if waveforms.is_floating_point() else waveforms.float().mul_(STEP)
