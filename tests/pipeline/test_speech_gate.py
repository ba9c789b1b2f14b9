"""The speech gate lets real speech through and stops silence and noise before Whisper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from speaker_transcripts.pipeline.audio import as_float32, decode_file
from speaker_transcripts.pipeline.speech_gate import SpeechGate


@pytest.fixture(scope="module")
def gate():
    return SpeechGate()


def test_real_speech_passes(gate, speech_wav):
    assert gate.contains_speech(as_float32(decode_file(speech_wav).samples))


def test_speech_after_a_long_silence_is_found(gate, speech_wav):
    speech = as_float32(decode_file(speech_wav).samples)
    assert gate.contains_speech(np.concatenate([np.zeros(16000 * 45, dtype=np.float32), speech]))


@pytest.mark.parametrize("seconds", [0.05, 5.0, 65.0])
def test_silence_is_stopped(gate, seconds):
    assert not gate.contains_speech(np.zeros(int(16000 * seconds), dtype=np.float32))


def test_white_and_pink_noise_are_stopped(gate):
    rng = np.random.default_rng(1)
    white = rng.standard_normal(16000 * 10)
    spectrum = np.fft.rfft(rng.standard_normal(16000 * 10))
    pink = np.fft.irfft(spectrum / np.sqrt(np.arange(1, len(spectrum) + 1)), n=16000 * 10)
    for noise in (white, pink):
        assert not gate.contains_speech((0.3 * noise / np.abs(noise).max()).astype(np.float32))


def test_loading_the_gate_keeps_torch_threads():
    """silero_vad sets torch to one thread on import; the gate must not let that slow Whisper down.
    A fresh interpreter, because the import happens once per process."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import numpy, torch; torch.set_num_threads(2); from speaker_transcripts.pipeline.speech_gate import SpeechGate; "
        "SpeechGate().contains_speech(numpy.zeros(16000, dtype=numpy.float32)); print(torch.get_num_threads())"
    )
    root = Path(__file__).resolve().parents[2]
    completed = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert completed.stdout.strip().splitlines()[-1] == "2"


def test_batched_windows_give_silero_s_own_spans(gate):
    """The gate runs Silero's network over many windows at once; its spans are the ones Silero's
    own window-by-window ``get_speech_timestamps`` finds, on a real two-speaker recording made
    longer than a batch (``WINDOWS_PER_CALL``) so the recurrent state crosses a call."""
    import silero_vad
    import torch

    from speaker_transcripts.pipeline import speech_gate

    sample = Path(__file__).resolve().parents[2] / "samples" / "two-readers.wav"
    speech = as_float32(decode_file(sample.read_bytes()).samples)
    pause = np.zeros(16000 * 3, dtype=np.float32)
    samples = np.concatenate([speech, pause] * 14)[: speech_gate.WINDOWS_PER_CALL * speech_gate.WINDOW + 777]
    assert len(samples) > speech_gate.WINDOWS_PER_CALL * speech_gate.WINDOW
    own = silero_vad.load_silero_vad()
    with torch.inference_mode():
        expected = silero_vad.get_speech_timestamps(
            torch.from_numpy(samples), own, sampling_rate=16000, threshold=speech_gate.SPEECH_THRESHOLD,
            min_speech_duration_ms=speech_gate.MIN_SPEECH_MS, max_speech_duration_s=10.0,
        )
        own.reset_states()
        windows = [torch.nn.functional.pad(torch.from_numpy(samples[i : i + 512]), (0, max(0, i + 512 - len(samples))))
                   for i in range(0, len(samples), 512)]
        own_probabilities = [own(window, 16000).item() for window in windows]
    assert gate.speech_regions(samples, 10.0) == [(span["start"], span["end"]) for span in expected] != []
    batched = gate._speech_probabilities(samples)
    assert len(batched) == len(own_probabilities)
    assert max(abs(a - b) for a, b in zip(batched, own_probabilities, strict=True)) < 1e-4
    assert gate.speech_regions(np.zeros(0, dtype=np.float32), 10.0) == []


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="reads Linux's /proc/self/status")
def test_the_gate_holds_no_copy_of_the_file(gate):
    """Padding the file to whole windows and adding each window's context built two copies of it
    (a 3-h file's 691 MB, then 778 MB): the whole windows are now a view of the samples and each call's
    context is built as it goes in. The peak above the start stays well under the file's own size."""

    def status(key: str) -> int:
        with open("/proc/self/status") as lines:
            return next(int(line.split()[1]) for line in lines if line.startswith(key)) * 1024

    hour = (np.random.default_rng(0).standard_normal(16000 * 3600) * 0.01).astype(np.float32)
    gate.speech_regions(hour[: 16000 * 200], 30.0)  # the calls' own working memory, once
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak (VmHWM) starts again from here
    before = status("VmRSS")
    gate.speech_regions(hour, 30.0)
    assert status("VmHWM") - before < hour.nbytes / 2
