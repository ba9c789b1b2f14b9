"""Handing memory back to the system: freed heap, the GPU libraries where no GPU exists (pipeline/heap.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from speaker_transcripts.pipeline import heap


def test_the_trim_really_runs_on_glibc():
    assert heap._libc() is not None, "glibc on Linux: malloc_trim is there"
    heap.return_freed_memory()


def test_the_heap_is_trimmed_while_the_block_runs_and_never_after(monkeypatch):
    trims = []
    trimmed_twice = threading.Event()

    def trim() -> None:
        trims.append(1)
        if len(trims) >= 2:
            trimmed_twice.set()

    monkeypatch.setattr(heap, "return_freed_memory", trim)
    with heap.trimmed_every(every_s=0.001):
        assert trimmed_twice.wait(timeout=60), "the trimmer thread trims again and again while the block runs"
    assert not [thread for thread in threading.enumerate() if thread.name == "heap-trim"], "the trimmer has ended"


def test_the_trimmer_ends_when_the_block_fails(monkeypatch):
    monkeypatch.setattr(heap, "return_freed_memory", lambda: None)
    with pytest.raises(ValueError), heap.trimmed_every(every_s=0.001):
        raise ValueError("a request's stage failed")
    assert not [thread for thread in threading.enumerate() if thread.name == "heap-trim"]


MAPS = """\
7f0000000000-7f0000100000 r--p 00000000 08:01 11 /venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13
7f0000100000-7f0000200000 r-xp 00100000 08:01 11 /venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13
7f0000200000-7f0000300000 r-xp 00000000 08:01 12 /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so
7f0000300000-7f0000400000 r-xp 00000000 08:01 13 /venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so
7f0000400000-7f0000500000 r-xp 00000000 08:01 14 /venv/lib/python3.11/site-packages/torch/lib/libc10_cuda.so
7f0000500000-7f0000600000 rw-p 00000000 00:00 0 [heap]
7f0000600000-7f0000700000 rw-p 00000000 00:00 0
7f0000700000-7f0000800000 r-xp 00000000 08:01 15 /home/nvidia/venv/lib/python3.11/site-packages/numpy/core/_multiarray.so
"""


class RecordingLibc:
    def __init__(self) -> None:
        self.advised: list[tuple[int, int, int]] = []

    def madvise(self, start: int, length: int, advice: int) -> int:
        self.advised.append((start, length, advice))
        return 0


def test_only_the_gpu_libraries_pages_are_handed_back_where_no_gpu_exists(tmp_path, monkeypatch):
    """torch's CUDA libraries (pip's nvidia-* wheels, torch's own *_cuda libraries), never the CPU
    libraries or a path that merely has "nvidia" in it, and nothing anonymous."""
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    libc = RecordingLibc()
    monkeypatch.setattr(heap, "_libc", lambda: libc)
    monkeypatch.setattr(heap, "GPU_DEVICE_NODES", (str(tmp_path / "nvidiactl"),))
    assert heap.release_gpu_library_pages(str(maps)) == 4
    assert libc.advised == [
        (0x7F0000000000, 0x100000, heap.MADV_PAGEOUT),
        (0x7F0000100000, 0x100000, heap.MADV_PAGEOUT),
        (0x7F0000200000, 0x100000, heap.MADV_PAGEOUT),
        (0x7F0000400000, 0x100000, heap.MADV_PAGEOUT),
    ]


def test_nothing_is_handed_back_where_a_gpu_device_exists(tmp_path, monkeypatch):
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    device = tmp_path / "nvidiactl"
    device.touch()
    libc = RecordingLibc()
    monkeypatch.setattr(heap, "_libc", lambda: libc)
    monkeypatch.setattr(heap, "GPU_DEVICE_NODES", (str(device),))
    assert heap.release_gpu_library_pages(str(maps)) == 0
    assert libc.advised == []


GPU_PAGES_PROBE = """
import re, sys
import speaker_transcripts, torch
from speaker_transcripts.pipeline import heap

def gpu_library_kb():
    total, counting = 0, False
    for line in open("/proc/self/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            counting = bool(heap.GPU_LIBRARY.search(line))
        elif counting and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total

before = gpu_library_kb()
released = heap.release_gpu_library_pages()
torch.ones(64, 64) @ torch.ones(64, 64)
print(before, released, gpu_library_kb())
"""


def test_torchs_cuda_libraries_leave_a_gpu_less_process_for_real():
    """The real process: PyPI's CUDA build of torch reads its CUDA libraries' pages in on import;
    after the call, with CPU work done since, almost none of them are resident."""
    if any(os.path.exists(node) for node in heap.GPU_DEVICE_NODES):
        pytest.skip("this machine has a GPU device, where the libraries are kept")
    output = subprocess.run([sys.executable, "-c", GPU_PAGES_PROBE], capture_output=True, text=True, check=True)
    before, released, after = (int(field) for field in output.stdout.split())
    if before == 0:
        pytest.skip("this torch maps no CUDA libraries (a CPU build)")
    assert released > 0
    assert after < before / 4, f"{after} of {before} kB still resident"
