"""Handing freed heap back to the system (pipeline/heap.py)."""

from __future__ import annotations

from speaker_transcripts.pipeline import heap


def test_the_trim_really_runs_on_glibc():
    assert heap._libc() is not None, "glibc on Linux: malloc_trim is there"
    heap.return_freed_memory()


def test_a_periodic_trim_runs_at_most_once_per_interval(monkeypatch):
    """A stage's progress callback comes at every batch; trimming each time would cost 15 ms a batch."""
    clock = [100.0]
    trims = []
    monkeypatch.setattr(heap.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(heap, "return_freed_memory", lambda: trims.append(clock[0]))
    trim = heap.PeriodicTrim(every_s=10.0)
    for now in (100.0, 105.0, 109.9, 110.0, 112.0, 119.9, 120.5, 200.0):
        clock[0] = now
        trim()
    assert trims == [110.0, 120.5, 200.0]
