"""Cutting community-1's parts out of moonshine-voice's library: at the pinned places, with the pinned hashes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from speaker_transcripts.models import moonshine_blobs
from speaker_transcripts.models.moonshine_blobs import Blob, BlobError, community1_parts, cut


def library_with(tmp_path, pieces: dict[str, tuple[bytes, str, tuple[int, ...]]]):
    """A stand-in library: filler with each piece at its own offset, and the pins that find them."""
    data = bytearray(b"\x7fELF" + bytes(60))
    blobs = {}
    for name, (piece, dtype, shape) in pieces.items():
        blobs[name] = Blob(len(data), len(piece), hashlib.sha256(piece).hexdigest(), dtype, shape)
        data += piece + bytes(13)
    path = tmp_path / "libmoonshine.so"
    path.write_bytes(bytes(data))
    return path, blobs


def test_each_blob_is_cut_from_its_place_and_a_changed_byte_is_refused(tmp_path):
    path, blobs = library_with(tmp_path, {"a": (b"first blob", "uint8", ()), "b": (b"second", "uint8", ())})
    assert cut(path, blobs) == {"a": b"first blob", "b": b"second"}
    data = bytearray(path.read_bytes())
    data[blobs["b"].offset + 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(BlobError, match="holds no b of 6 bytes with the pinned SHA-256 at offset"):
        cut(path, blobs)


def test_a_library_cut_short_is_refused(tmp_path):
    path, blobs = library_with(tmp_path, {"a": (b"first blob", "uint8", ())})
    path.write_bytes(path.read_bytes()[: blobs["a"].offset + 4])
    with pytest.raises(BlobError, match="holds no a"):
        cut(path, blobs)


def test_the_plda_arrays_come_out_in_pyannotes_npz_names_shapes_and_types(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    arrays = {name: rng.standard_normal(blob.shape).astype(blob.dtype)
              for name, blob in moonshine_blobs.BLOBS.items() if name != "embedding_ort_data"}
    pieces = {name: (array.tobytes(), moonshine_blobs.BLOBS[name].dtype, array.shape) for name, array in arrays.items()}
    pieces["embedding_ort_data"] = (b"ORTM model bytes", "uint8", ())
    path, blobs = library_with(tmp_path, pieces)
    monkeypatch.setattr(moonshine_blobs, "BLOBS", blobs)
    parts = community1_parts(path)
    assert parts.embedding_ort == b"ORTM model bytes"
    assert set(parts.xvec_transform) == {"mean1", "mean2", "lda"} and set(parts.plda) == {"mu", "tr", "psi"}
    np.testing.assert_array_equal(parts.xvec_transform["lda"], arrays["xvec_lda"])
    np.testing.assert_array_equal(parts.plda["tr"], arrays["plda_tr"])
    assert parts.xvec_transform["lda"].shape == (256, 128) and parts.plda["psi"].dtype == np.float64


def test_the_pins_are_the_measured_layout():
    """community-1's PLDA space is 128-d over 256-d WeSpeaker embeddings; sizes follow from shapes and types."""
    for name, blob in moonshine_blobs.BLOBS.items():
        assert len(blob.sha256) == 64, name
        if blob.shape:
            assert blob.size == np.dtype(blob.dtype).itemsize * int(np.prod(blob.shape)), name
