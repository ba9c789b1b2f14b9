"""The speech gate lets real speech through and stops silence and noise before Whisper."""

from __future__ import annotations

import numpy as np
import pytest

from audio import decode_file
from speech_gate import SpeechGate


@pytest.fixture(scope="module")
def gate():
    return SpeechGate()


def test_real_speech_passes(gate, speech_wav):
    assert gate.contains_speech(decode_file(speech_wav).samples)


def test_speech_after_a_long_silence_is_found(gate, speech_wav):
    speech = decode_file(speech_wav).samples
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
