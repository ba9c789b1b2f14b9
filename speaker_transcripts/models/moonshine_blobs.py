"""pyannote community-1's trained parts, cut out of ``moonshine-voice`` 0.1.0's ``libmoonshine.so``.

The library embeds community-1 (``cppannote::embedded_community1::*``) as read-only data: the
segmentation and WeSpeaker embedding models as int8 ONNX-Runtime (ORT format) flatbuffers, and
the PLDA and x-vector transforms as raw little-endian arrays, the contents of pyannote's
``plda.npz`` and ``xvec_transform.npz``. In that ``.so`` the ``.rodata`` section's addresses are
its file offsets, so a symbol's address and size (``nm -D -S``) locate its bytes in the file.
Those places are pinned below with each blob's SHA-256: a cut is refused unless every blob is
the one this project measured. The segmentation blob is not cut: it is segmentation-3.0
(its hard output equals the float model's, which the pipeline keeps for its soft scores and any
window length, e.g. the live diarizer's 5-s windows).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LIBRARY = "moonshine_voice/libmoonshine.so"


class BlobError(RuntimeError):
    """A blob is not where it is pinned, or not what it should be."""


@dataclass(frozen=True)
class Blob:
    """Bytes ``size`` at file offset ``offset`` of the library, with their SHA-256; ``dtype`` and
    ``shape`` when they are an array."""

    offset: int
    size: int
    sha256: str
    dtype: str = "uint8"
    shape: tuple[int, ...] = ()


# nm -D -S libmoonshine.so | c++filt | grep embedded_community1 (moonshine-voice 0.1.0, wheel sha256 0f833deb...)
BLOBS: dict[str, Blob] = {
    "embedding_ort_data": Blob(12463296, 6975920, "6e4af7d49562e6e7042672e444d6394935cb2c23c3a7dd4919da45922b91735b"),
    "xvec_mean1": Blob(10602432, 2048, "4ff32f244658ff69c12b11c19e0f95e4ef8d33f22781f0e2821c4ac986941487", "<f8", (256,)),
    "xvec_mean2": Blob(10604480, 512, "48cc169ece06780fdc298a3e901f298f35e867bf20a477ccdd96aae4e87a9a02", "<f4", (128,)),
    "xvec_lda": Blob(10604992, 131072, "2cabb824db82e3276ff7b782cf17951086f6633436e03ad5b4c4e6c2b5479375", "<f4", (256, 128)),
    "plda_mu": Blob(10736064, 1024, "d67b1d54babdfd8c2547b9e5ba96abb30079b5bcc6b4aaa5985e77571537c798", "<f8", (128,)),
    "plda_tr": Blob(10737088, 131072, "f7acd9020ace3908b7ba37c04091fe0555fff4ed0678647866ce2c67208b76f6", "<f8", (128, 128)),
    "plda_psi": Blob(10868160, 1024, "72c17389945e40565bd3e07cf529dad328e4f28649b5c286dee92348f623b76b", "<f8", (128,)),
}


@dataclass(frozen=True)
class Community1Parts:
    """What the pipeline folder is assembled from."""

    embedding_ort: bytes
    xvec_transform: dict[str, np.ndarray]  # pyannote's xvec_transform.npz: mean1, mean2, lda
    plda: dict[str, np.ndarray]  # pyannote's plda.npz: mu, tr, psi


def cut(library: Path, blobs: dict[str, Blob]) -> dict[str, bytes]:
    """Each blob's bytes, checked against its pinned size and SHA-256."""
    data = library.read_bytes()
    cut_out: dict[str, bytes] = {}
    for name, blob in blobs.items():
        piece = data[blob.offset : blob.offset + blob.size]
        if len(piece) != blob.size or hashlib.sha256(piece).hexdigest() != blob.sha256:
            raise BlobError(
                f"{library.name} holds no {name} of {blob.size} bytes with the pinned SHA-256 at offset {blob.offset}: "
                "it is not the library this project was tested with"
            )
        cut_out[name] = piece
    return cut_out


def community1_parts(library: Path) -> Community1Parts:
    """The embedding model and the PLDA arrays, checked, in the form pyannote reads them."""
    pieces = cut(library, BLOBS)

    def array(name: str) -> np.ndarray:
        blob = BLOBS[name]
        return np.frombuffer(pieces[name], dtype=blob.dtype).reshape(blob.shape).copy()

    return Community1Parts(
        embedding_ort=pieces["embedding_ort_data"],
        xvec_transform={"mean1": array("xvec_mean1"), "mean2": array("xvec_mean2"), "lda": array("xvec_lda")},
        plda={"mu": array("plda_mu"), "tr": array("plda_tr"), "psi": array("plda_psi")},
    )
