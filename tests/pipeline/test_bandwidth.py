"""A recording's band and the telephone filter (pipeline/bandwidth.py): numpy and scipy only."""

from __future__ import annotations

import numpy as np
from scipy import signal

from speaker_transcripts.pipeline.bandwidth import NARROWBAND_EDGE_HZ, is_narrowband, telephone_band, upper_edge_hz


def noise(seconds: float = 3.0) -> np.ndarray:
    return np.random.default_rng(0).normal(0.0, 0.1, int(seconds * 16000)).astype(np.float32)


def test_wideband_audio_reaches_the_top_and_a_telephone_copy_stops_near_4_khz():
    wide = noise()
    assert upper_edge_hz(wide) > 7000 and not is_narrowband(wide)
    line = telephone_band(wide)
    assert upper_edge_hz(line) < NARROWBAND_EDGE_HZ and is_narrowband(line)


def test_8_khz_audio_resampled_to_16_khz_reads_as_narrowband():
    """What the decoder makes of a call recorded at 8 kHz: nothing above 4 kHz."""
    at_8k = signal.resample_poly(noise(), 1, 2)
    assert is_narrowband(signal.resample_poly(at_8k, 2, 1).astype(np.float32))


def test_too_little_audio_or_silence_gives_no_estimate():
    assert upper_edge_hz(noise(0.5)) is None and not is_narrowband(noise(0.5))
    assert upper_edge_hz(np.zeros(48000, dtype=np.float32)) is None


def test_the_telephone_band_keeps_speech_frequencies_and_removes_the_rest():
    t = np.arange(32000) / 16000
    tones = {hz: np.sin(2 * np.pi * hz * t).astype(np.float32) for hz in (100, 1000, 6000)}
    kept = {hz: float(np.std(telephone_band(tone)) / np.std(tone)) for hz, tone in tones.items()}
    assert kept[1000] > 0.99 and kept[100] < 0.01 and kept[6000] < 0.02
    assert telephone_band(tones[1000]).dtype == np.float32
