"""A recording's band and the telephone filter (pipeline/bandwidth.py): numpy and scipy only."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import signal

from speaker_transcripts.pipeline import bandwidth
from speaker_transcripts.pipeline.bandwidth import (
    NARROWBAND_EDGE_HZ,
    SEGMENT,
    is_narrowband,
    long_term_spectrum,
    telephone_band,
    upper_edge_hz,
)


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


@pytest.mark.parametrize("length", [SEGMENT, SEGMENT + 511, 5 * SEGMENT, 23 * SEGMENT + 700, 48000])
@pytest.mark.parametrize("segments_per_block", [1, 2, 7, 1000])
def test_the_spectrum_block_by_block_is_welchs_over_the_whole_recording(length: int, segments_per_block: int):
    """Blocks on the segment grid, overlapping by half a segment: every segment counted once."""
    samples = noise(length / 16000)
    whole_frequencies, whole = signal.welch(samples.astype(np.float64), fs=16000, nperseg=SEGMENT)
    frequencies, power = long_term_spectrum(samples, 16000, segments_per_block)
    np.testing.assert_array_equal(frequencies, whole_frequencies)
    np.testing.assert_allclose(power, whole, rtol=1e-10)


def test_the_spectrum_of_a_long_recording_is_taken_in_bounded_blocks(monkeypatch: pytest.MonkeyPatch):
    """Memory stays that of one block whatever the length (Welch over a whole 3-hour file: ~6 GB)."""
    seen: list[int] = []
    welch = signal.welch

    def recording(block: np.ndarray, **options: object) -> tuple[np.ndarray, np.ndarray]:
        seen.append(len(block))
        return welch(block, **options)

    monkeypatch.setattr(signal, "welch", recording)
    upper_edge_hz(noise(200.0))
    assert len(seen) > 3 and max(seen) <= (bandwidth.SEGMENTS_PER_BLOCK + 1) * SEGMENT // 2


def test_a_spectrum_needs_one_whole_segment():
    with pytest.raises(ValueError, match="at least one segment"):
        long_term_spectrum(noise(0.05))
