"""How much of the spectrum a recording carries, and a clip brought down to it.

A voice embedding depends on the channel as much as on the voice: a reader enrolled from a laptop
clip scored 0.22 against their own voice on a telephone copy of the recording (0.73 on the
original), below an impostor's reach, so nobody could be named. Embedding the clip through the
recording's band (telephone: 300-3,400 Hz) brings the two onto equal terms (0.55 and 0.77 for the
two readers, ``bench/quality/enrolment_channels.py``). The estimate and the filter are plain numpy and
scipy: testable without torch.
"""

from __future__ import annotations

import numpy as np

from speaker_transcripts.pipeline.samples import as_float32

SAMPLING_RATE = 16000
TELEPHONE_BAND_HZ = (300.0, 3400.0)  # ITU-T G.711/G.712 narrowband telephony
NARROWBAND_EDGE_HZ = 5500.0  # spectrum stopping below: telephone-band (telephone copies measured 3.8-4.4 kHz, wideband 7.1-8 kHz)
EDGE_DROP_DB = 35.0  # below the speech band's level, a frequency counts as carrying nothing
MIN_SPEECH_S = 1.0  # less audio than this gives no estimate
SEGMENT = 1024  # samples per Welch segment; segments overlap by half
# Segments a block of the recording hands Welch at once (60 s at 16 kHz). Welch over a whole file keeps every
# segment, detrended, windowed and transformed, at once: 10 minutes took the process from 147 to 509 MB, and a
# 3-hour file would need about 6 GB (issue 50). Blocks keep it to a few MB; the average is the same.
SEGMENTS_PER_BLOCK = 1875


def upper_edge_hz(samples: np.ndarray, sampling_rate: int = SAMPLING_RATE) -> float | None:
    """The highest frequency the recording carries: where its long-term spectrum last stands
    within ``EDGE_DROP_DB`` of its level in the 300-3,000 Hz speech band (None for less than
    ``MIN_SPEECH_S`` of audio or silence). Wideband speech reaches 7-8 kHz at 16 kHz; a telephone
    line, or 8-kHz audio resampled, stops near 3.4-4 kHz."""

    if len(samples) < MIN_SPEECH_S * sampling_rate:
        return None
    frequencies, power = long_term_spectrum(samples, sampling_rate)
    speech = power[(frequencies >= 300) & (frequencies <= 3000)]
    if not speech.size or float(np.median(speech)) <= 0.0:
        return None
    level = 10 * np.log10(np.maximum(power, 1e-20) / float(np.median(speech)))
    carried = np.flatnonzero((level > -EDGE_DROP_DB) & (frequencies >= 300))
    return float(frequencies[carried[-1]]) if carried.size else None


def long_term_spectrum(
    samples: np.ndarray, sampling_rate: int = SAMPLING_RATE, segments_per_block: int = SEGMENTS_PER_BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """Welch's power spectral density of ``samples`` (``SEGMENT``-sample Hann segments, half
    overlapping), computed block by block so that memory does not grow with the recording. Blocks
    start on the segment grid and overlap by half a segment, so every segment of the whole file
    falls in exactly one block, and the average of the blocks' spectra, weighted by their segment
    counts, is Welch's average over the whole file."""
    from scipy import signal

    if len(samples) < SEGMENT:
        raise ValueError(f"a spectrum needs at least one segment of {SEGMENT} samples; got {len(samples)}")
    hop = SEGMENT // 2
    step = segments_per_block * hop
    frequencies, total, segments = None, None, 0
    for start in range(0, max(len(samples) - SEGMENT, 0) + 1, step):
        block = samples[start : start + step + hop]
        count = (len(block) - SEGMENT) // hop + 1
        frequencies, power = signal.welch(as_float32(block).astype(np.float64), fs=sampling_rate, nperseg=SEGMENT)
        total = power * count if total is None else total + power * count
        segments += count
    return frequencies, total / segments


def is_narrowband(samples: np.ndarray, sampling_rate: int = SAMPLING_RATE) -> bool:
    edge = upper_edge_hz(samples, sampling_rate)
    return edge is not None and edge < NARROWBAND_EDGE_HZ


def telephone_band(samples: np.ndarray, sampling_rate: int = SAMPLING_RATE) -> np.ndarray:
    """``samples`` through a telephone channel's band-pass (``TELEPHONE_BAND_HZ``), zero-phase,
    as float32, as an embedding model takes it (16-bit input is scaled first)."""
    from scipy import signal

    sections = signal.butter(6, TELEPHONE_BAND_HZ, btype="bandpass", fs=sampling_rate, output="sos")
    return signal.sosfiltfilt(sections, as_float32(samples).astype(np.float64)).astype(np.float32)
