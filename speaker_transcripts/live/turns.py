"""Where a speaker's turn starts and stops in a live stream: OpenAI's ``server_vad``, on Silero.

The speech probabilities come 32 ms window by window (``speech_gate.SpeechStream``); this module
turns them into turn boundaries with the rules of OpenAI's ``server_vad`` turn detection and
Silero's own ``VADIterator``: speech starts where the probability reaches ``threshold`` and stays
up for ``MIN_SPEECH_MS`` (a click starts no turn), backdated by ``prefix_padding_ms``; it stops
once the probability has stayed below ``threshold - HYSTERESIS`` for ``silence_duration_ms``,
at the end of the last speech window plus ``END_PAD_MS``.

Pure arithmetic on sample indices: tested without a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

MIN_SPEECH_MS = 160  # 5 windows: a door or a click is shorter
HYSTERESIS = 0.15  # Silero's VADIterator: speech ends below threshold - 0.15
END_PAD_MS = 100  # the end of a turn keeps a little of the silence, so a last consonant is whole


class TurnDetection(BaseModel):
    """OpenAI's ``server_vad`` settings (``session.audio.input.turn_detection``), with its defaults."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: str = "server_vad"
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0)
    prefix_padding_ms: int = Field(default=300, ge=0, le=2000)
    silence_duration_ms: int = Field(default=500, ge=100, le=10000)


@dataclass(frozen=True)
class TurnBoundary:
    """A turn starting (``started``) or stopping at ``sample`` on the session's clock."""

    started: bool
    sample: int


class TurnDetector:
    """Feed it window probabilities in order; it says where turns start and stop."""

    def __init__(self, settings: TurnDetection, window: int, sampling_rate: int) -> None:
        self.settings = settings
        self.window = window
        self.sampling_rate = sampling_rate
        self.in_speech = False
        self.next_window = 0  # index of the next window to be fed
        self._candidate: int | None = None  # first window of speech not yet long enough to start a turn
        self._last_speech: int | None = None  # last window over the threshold in this turn
        self.floor = 0  # a turn never starts before the last one's end

    def _windows(self, milliseconds: int) -> int:
        return max(1, round(milliseconds * self.sampling_rate / 1000 / self.window))

    def feed(self, probabilities: Iterable[float]) -> list[TurnBoundary]:
        boundaries: list[TurnBoundary] = []
        for probability in probabilities:
            index = self.next_window
            self.next_window += 1
            if not self.in_speech:
                if probability < self.settings.threshold:
                    self._candidate = None
                    continue
                self._candidate = index if self._candidate is None else self._candidate
                if index - self._candidate + 1 >= self._windows(MIN_SPEECH_MS):
                    start = self._candidate * self.window - self.settings.prefix_padding_ms * self.sampling_rate // 1000
                    boundaries.append(TurnBoundary(True, max(start, self.floor, 0)))
                    self.in_speech, self._last_speech, self._candidate = True, index, None
                continue
            if probability >= self.settings.threshold - HYSTERESIS:
                self._last_speech = index
            elif index - self._last_speech >= self._windows(self.settings.silence_duration_ms):
                end = (self._last_speech + 1) * self.window + END_PAD_MS * self.sampling_rate // 1000
                boundaries.append(TurnBoundary(False, end))
                self.in_speech, self.floor = False, end
        return boundaries

    def force_stop(self, sample: int) -> None:
        """The turn was ended from outside (a client's commit): the next one starts afresh."""
        self.in_speech, self._candidate, self.floor = False, None, max(self.floor, sample)
