"""Handing memory the process does not use back to the system: freed heap (glibc ``malloc_trim``)
and, on a machine with no GPU, the pages of torch's CUDA libraries.

glibc keeps freed memory inside its heap and gives back only what lies at its top. Requests free
large, differently sized buffers, so what they leave stays resident and the next heavy request peaks
on top of it; trimming during a request (every ``TRIM_EVERY_S``) hands it back for about 20 ms a trim.
Nothing is trimmed where the C library is not glibc (macOS, musl).

PyPI's torch for x86_64 Linux is its CUDA build: loading it reads about 145 MB of CUDA library code
into the process even where no GPU exists. Those pages are clean copies of files, but they count as
the process's resident memory until the kernel needs them; where no GPU device exists nothing can
run them, so they are handed back (``madvise(MADV_PAGEOUT)``, Linux 5.4+). The figures:
docs/performance.md, Memory.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from speaker_transcripts import GPU_DEVICE_NODES

MADV_PAGEOUT = 21  # <linux/mman.h>: reclaim these pages now (clean file pages are dropped, not written)
# torch's CUDA parts: pip's nvidia-* wheels (site-packages/nvidia/...), torch's own CUDA libraries
# (torch/lib/libtorch_cuda.so, libc10_cuda.so, ...) and the CUDA Python bindings.
GPU_LIBRARY = re.compile(r"-packages/nvidia/|-packages/cuda/bindings/|/lib(?:torch_cuda\w*|c10_cuda|caffe2_nvrtc|torch_nvshmem)\.so")
TRIM_EVERY_S = 1.0  # during a request: a trim this often (21 ms each on a 30-min request, 2 % of one core)


def return_freed_memory() -> None:
    """Hand the heap freed so far back to the system."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


@contextmanager
def trimmed_every(every_s: float = TRIM_EVERY_S) -> Iterator[None]:
    """While the block runs, a thread hands the freed heap back every ``every_s`` seconds.

    Whisper's batches and pyannote's beside them allocate and free large, differently sized
    blocks; glibc reuses the freed space, but a sweep through it touches page after page, so a
    30-min diarized request's resident memory climbed about 50 MB a second between trims while
    both ran, and stages without a progress callback (Whisper after pyannote, the phrase check)
    kept what they freed. Trimming from a thread reaches every stage: that request peaked at
    1.92-1.94 GiB with a trim every 2 s against 1.98-2.39 with pyannote's hook trimming every
    10 s. Every second rather than every 2 s took a 3-h request on the float32 layout of a CPU
    without bfloat16 from 2.40 to 2.30 GiB, under 2.5 GB, for 0.6 s more trimming per 30 min of
    audio (``bench/memory/long_recording.py``; docs/performance.md, "Footprint, round fourteen")."""
    stop = threading.Event()

    def trim_until_stopped() -> None:
        while not stop.wait(every_s):
            return_freed_memory()

    trimmer = threading.Thread(target=trim_until_stopped, name="heap-trim", daemon=True)
    trimmer.start()
    try:
        yield
    finally:
        stop.set()
        trimmer.join()


def release_gpu_library_pages(maps_path: str = "/proc/self/maps") -> int:
    """Page out the GPU libraries' file pages where this machine has no GPU device; returns how
    many mappings were handed back (none where a GPU device exists, off Linux, or off glibc)."""
    libc = _libc()
    if libc is None or any(os.path.exists(node) for node in GPU_DEVICE_NODES) or not os.path.exists(maps_path):
        return 0
    released = 0
    with open(maps_path) as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or not GPU_LIBRARY.search(fields[5]):
                continue
            start, end = (int(address, 16) for address in fields[0].split("-"))
            # A kernel before 5.4 refuses the advice (EINVAL): the pages then stay, as they were.
            released += libc.madvise(start, end - start, MADV_PAGEOUT) == 0
    return released


@functools.cache
def _libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): nothing to trim
        return None
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]  # addresses past 2**31
    return libc
