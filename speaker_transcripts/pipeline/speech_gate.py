"""Find the speech in a recording before Whisper sees it: whether there is any, and where.

Whisper hallucinates on audio without speech: on 5 s of silence whisper-base writes " you", on
10 s of pink noise a Japanese "thanks for watching" tagged as Nynorsk (both measured on
``../shared/dev-audio``). Silero VAD, whose weights ship inside its PyPI package (no download),
rejects both. The gate scans the audio in blocks and stops at the first block with speech,
so on real speech it costs a few milliseconds. ``speech_regions`` scans the whole file and
says where speech is, for speech-aligned long-form decoding (``long_form.py``). Silero's own
``get_speech_timestamps`` calls the network once per 32-ms window from Python, which took 11 s
of a 56-s transcription of a 10-min file on an AVX2 CPU; the gate runs the same network over
thousands of windows per call and hands the probabilities to Silero's own span rules
(``get_speech_timestamps_from_probs``), with the same spans: about 0.3 % of the audio's
duration on one CPU thread.
"""

from __future__ import annotations

import threading
import warnings
from types import ModuleType

import numpy as np
import torch

from speaker_transcripts.pipeline.audio import SAMPLING_RATE
from speaker_transcripts.pipeline.cpu_threads import torch_threads
from speaker_transcripts.pipeline.samples import as_float32_tensor

BLOCK_S = 30.0  # scan in Whisper-window-sized blocks; most speech is found in the first one
MIN_SPEECH_MS = 250
# Silero's default. Lower thresholds find more of the quiet far-field speech in the AMI meeting
# excerpts (reference speech found: 80.8 % at 0.5, 86.9 % at 0.25; bench/quality/vad_threshold.py), but
# the transcripts did not gain from it: at 0.25 the dev conversations' WER rose from 8.4 % to 9.8 %
# (29 errors against 25 on 296 words) and the meetings gave about as many words as at 0.5.
SPEECH_THRESHOLD = 0.5
WINDOW = 512  # Silero's window at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous window each window sees
WINDOWS_PER_CALL = 4096  # about 2 min of audio per batched call: a few MB whatever the file's length


def _import_silero_vad() -> ModuleType:
    """``silero_vad`` calls ``torch.set_num_threads(1)`` when imported (6.2.3): every model in the
    process, Whisper and pyannote included, would then run on one core. Keep the count we had."""
    threads = torch.get_num_threads()
    import silero_vad

    torch.set_num_threads(threads)
    return silero_vad


class SpeechGate:
    """Silero VAD, its network run over many windows at once (``_speech_probabilities``), on one
    thread: on 7 s of speech 0.04 s against 0.11 s on two, and 23 s on two while another process
    was busy (OpenMP threads spinning against each other)."""

    def __init__(self) -> None:
        self._silero = _import_silero_vad()
        with warnings.catch_warnings():  # silero-vad 6.2.3 loads its TorchScript file, which torch 2.14 deprecates
            warnings.filterwarnings("ignore", message=r".*torch\.jit\.load.* is deprecated", category=FutureWarning)
            self._network = self._silero.load_silero_vad()._model  # the 16-kHz network
        cell = self._network.decoder.rnn
        self._recurrence = torch.nn.LSTM(cell.weight_ih.shape[1], cell.weight_hh.shape[1])
        with torch.no_grad():
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(self._recurrence, f"{name}_l0").copy_(getattr(cell, name))
        self._lock = threading.Lock()

    def speech_regions(self, samples: np.ndarray, max_speech_s: float) -> list[tuple[int, int]]:
        """Speech as ``[start, end)`` sample spans in time order. Speech running longer than
        ``max_speech_s`` is split at its last pause before that (Silero's own rule), so the
        spans fit Whisper's window wherever the speaker breathes."""
        with self._lock, torch.inference_mode(), torch_threads(1):
            spans = self._speech(samples, max_speech_duration_s=max_speech_s)
        return [(int(span["start"]), int(span["end"])) for span in spans]

    def contains_speech(self, samples: np.ndarray) -> bool:
        block = int(BLOCK_S * SAMPLING_RATE)
        with self._lock, torch.inference_mode(), torch_threads(1):
            return any(self._speech(samples[start : start + block]) for start in range(0, len(samples), block))

    def _speech(self, samples: np.ndarray, **options: float) -> list[dict[str, int]]:
        """Silero's speech spans with this module's settings (call under the lock)."""
        return self._silero.get_speech_timestamps_from_probs(
            self._speech_probabilities(samples),
            sampling_rate=SAMPLING_RATE,
            threshold=SPEECH_THRESHOLD,
            min_speech_duration_ms=MIN_SPEECH_MS,
            audio_length_samples=len(samples),
            **options,
        )

    def _speech_probabilities(self, samples: np.ndarray) -> list[float]:
        """Silero's speech probability for each 32-ms window, as its own ``get_speech_timestamps``
        computes them (each window with the last 64 samples of the one before, the recurrent
        state carried through the file), but batched: the front end runs on ``WINDOWS_PER_CALL``
        windows at a time and the recurrent layer over them in one LSTM call. Silero's loop calls
        the network once per window from Python: 13.1 s on a 10-min file against 1.7 s this way,
        the same spans, probabilities within 3e-5 (tests/pipeline/test_speech_gate.py). The whole
        windows are a view of ``samples`` and the last, padded one is run after them: padding the
        file whole copied a 3-h file's 691 MB. Each call's windows become float32 as they go in
        (a request's samples are held as 16-bit: ``samples.py``)."""
        audio = torch.from_numpy(np.ascontiguousarray(samples))
        whole = len(audio) // WINDOW * WINDOW
        windows = audio[:whole].reshape(-1, WINDOW)
        probabilities, state = self._windows_probabilities(windows, torch.zeros(1, CONTEXT), None)
        if whole == len(audio):
            return probabilities
        last = torch.nn.functional.pad(as_float32_tensor(audio[whole:]), (0, WINDOW - (len(audio) - whole)))[None]
        context = as_float32_tensor(windows[-1:, -CONTEXT:]) if len(windows) else torch.zeros(1, CONTEXT)
        return probabilities + self._windows_probabilities(last, context, state)[0]

    def _windows_probabilities(
        self, windows: torch.Tensor, context: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[list[float], tuple[torch.Tensor, torch.Tensor] | None]:
        """The probabilities of whole ``windows`` (count x ``WINDOW``) following ``context`` (the
        ``CONTEXT`` samples before them) and the recurrent ``state`` (None: the start of a stream);
        and the state after them. Each call's windows get their context as they go in (built for the
        whole file at once, it was another copy of it)."""
        probabilities = []
        for first in range(0, len(windows), WINDOWS_PER_CALL):
            block = as_float32_tensor(windows[first : first + WINDOWS_PER_CALL])
            before = context if first == 0 else as_float32_tensor(windows[first - 1 : first, -CONTEXT:])
            inputs = torch.cat([torch.cat([before, block[:-1, -CONTEXT:]]), block], dim=1)
            features = self._network.encoder(self._network.stft(inputs))
            hidden, state = self._recurrence(features.squeeze(-1).unsqueeze(1), state)  # the windows as one sequence
            speech = self._network.decoder.decoder(hidden.squeeze(1).unsqueeze(-1))
            probabilities.append(speech.squeeze(1).mean(dim=1))
        return (torch.cat(probabilities).tolist() if probabilities else []), state

    def stream(self) -> SpeechStream:
        """Probabilities for audio that arrives in pieces of any length (a live session)."""
        return SpeechStream(self)


class SpeechStream:
    """Silero over a stream: each call takes the new samples and gives the probabilities of the
    whole windows they complete, with the context and recurrent state carried between calls, so
    a stream fed in pieces gets what one call on all of it would give."""

    def __init__(self, gate: SpeechGate) -> None:
        self._gate = gate
        self._pending = np.zeros(0, dtype=np.float32)
        self._context = torch.zeros(1, CONTEXT)
        self._state: tuple[torch.Tensor, torch.Tensor] | None = None

    def probabilities(self, samples: np.ndarray) -> list[float]:
        pending = np.concatenate([self._pending, np.asarray(samples, dtype=np.float32)])
        whole = len(pending) // WINDOW * WINDOW
        self._pending = pending[whole:]
        if whole == 0:
            return []
        windows = torch.from_numpy(np.ascontiguousarray(pending[:whole])).reshape(-1, WINDOW)
        with self._gate._lock, torch.inference_mode(), torch_threads(1):
            probabilities, self._state = self._gate._windows_probabilities(windows, self._context, self._state)
        self._context = windows[-1:, -CONTEXT:]
        return probabilities
