"""Which decoding path a request with ``assisted="auto"`` takes: learnt from this server's own timings.

Speculative decoding pays when the assistant drafts well and cheaply relative to the main model:
the blog measured it 2.4x faster on 8 s of audio and slower on 60 s (A10G, large-v3 with
distil-large-v3), while on a 2-core CPU with an untrained 2-layer draft it was 2.3x *slower* even on
7 s. No fixed rule is right everywhere, so the policy measures. Audio longer than
``ASSISTED_MAX_SECONDS`` (default one 30-s window) is always decoded batched, where batching wins.
Shorter audio tries each path once, then takes the one with the lower recent compute time per
second of audio (an exponential moving average), and keeps learning from every request it serves.
"""

from __future__ import annotations

import threading

SMOOTHING = 0.3  # weight of the newest observation in the moving average


class DecodingPolicy:
    """Chooses assisted vs batched decoding for ``assisted="auto"`` requests."""

    def __init__(self, max_assisted_seconds: float) -> None:
        self.max_assisted_seconds = max_assisted_seconds
        self._seconds_per_audio_second: dict[bool, float | None] = {True: None, False: None}
        self._lock = threading.Lock()

    def choose(self, duration: float) -> bool:
        """True: draft with the assistant (batch size 1); False: batched windows."""
        if duration > self.max_assisted_seconds or duration <= 0:
            return False
        with self._lock:
            untried = [assisted for assisted, rate in self._seconds_per_audio_second.items() if rate is None]
            if untried:
                return untried[0]
            return self._seconds_per_audio_second[True] < self._seconds_per_audio_second[False]

    def record(self, assisted: bool, duration: float, seconds: float) -> None:
        """Learn from a finished decode of audio in the assisted regime (longer audio teaches nothing here)."""
        if duration <= 0 or duration > self.max_assisted_seconds:
            return
        rate = seconds / duration
        with self._lock:
            previous = self._seconds_per_audio_second[assisted]
            self._seconds_per_audio_second[assisted] = rate if previous is None else (1 - SMOOTHING) * previous + SMOOTHING * rate

    def snapshot(self) -> dict[str, float | None]:
        """Current estimates, for readiness reports and benchmarks."""
        with self._lock:
            return {"assisted": self._seconds_per_audio_second[True], "batched": self._seconds_per_audio_second[False]}
