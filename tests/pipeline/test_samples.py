"""How a request's samples are held (pipeline/samples.py): 16-bit, float32 where a model takes them."""

from __future__ import annotations

import numpy as np
import torch

from speaker_transcripts.pipeline.samples import STORED, as_float32, as_float32_tensor, stored


def test_every_16_bit_value_comes_back_as_the_float_its_decoder_gave():
    every = np.arange(-32768, 32768, dtype=np.int64).astype(STORED)
    decoded = every.astype(np.float64) / 32768  # what libswresample's s16 -> flt gives
    np.testing.assert_array_equal(as_float32(every), decoded.astype(np.float32))
    np.testing.assert_array_equal(stored(as_float32(every)), every)
    np.testing.assert_array_equal(as_float32_tensor(torch.from_numpy(every)).numpy(), as_float32(every))


def test_float_samples_are_rounded_to_16_bits_and_clipped_at_full_scale():
    floats = np.array([0.0, 0.49999, -1.0, 1.0, 1.7, -2.5, 3e-5, -1e-6], dtype=np.float32)
    held = stored(floats)
    assert held.dtype == STORED
    assert held.tolist() == [0, 16384, -32768, 32767, 32767, -32768, 1, 0]
    assert np.abs(as_float32(held) - np.clip(floats, -1, 1)).max() <= 2**-15


def test_float32_is_handed_on_without_a_copy_and_16_bit_kept_as_it_is():
    """A live session's samples are float32 already; a request's 16-bit ones are not copied to be stored."""
    live = np.linspace(-1, 1, 100, dtype=np.float32)
    assert as_float32(live) is live
    held = stored(live)
    assert stored(held) is held
    tensor = torch.from_numpy(live)
    assert as_float32_tensor(tensor).data_ptr() == tensor.data_ptr()
