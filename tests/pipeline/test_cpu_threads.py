"""Stages that run on one CPU thread leave every other thread's count, and later threads', as it was."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from pyannote.audio import Pipeline
from pyannote.core import Annotation, Segment

from speaker_transcripts.pipeline.cpu_threads import torch_threads, within_threads
from speaker_transcripts.pipeline.diarization import diarize


def _in_new_thread(work):
    """What ``work()`` returns when run on a thread that has not used torch before."""
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", work()))
    thread.start()
    thread.join()
    return result["value"]


def test_the_count_is_restored_for_this_thread_and_for_threads_started_later():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert _in_new_thread(torch.get_num_threads) == before


class _Failing(torch.nn.Module):
    def forward(self, value: torch.Tensor) -> torch.Tensor:
        if value.sum() < 0:
            raise ValueError("refused")
        self.threads_seen = torch.get_num_threads()
        return value


def test_a_large_product_runs_on_its_count_and_the_count_it_found_comes_back_even_when_it_fails():
    module = _Failing()
    within_threads(module, 3)
    with torch_threads(1):
        module(torch.ones(1))
        assert module.threads_seen == 3 and torch.get_num_threads() == 1
        with pytest.raises(ValueError):
            module(-torch.ones(1))
        assert torch.get_num_threads() == 1
        with torch_threads(2):
            module(torch.ones(1))
            assert torch.get_num_threads() == 2


class _CountingPipeline(Pipeline):
    """A pyannote pipeline that reports the thread count it ran with."""

    def apply(self, file, **hints):
        self.threads_seen = torch.get_num_threads()
        annotation = Annotation()
        annotation[Segment(0.0, 1.0)] = "SPEAKER_00"
        return annotation


def test_pyannote_on_cpu_runs_on_one_thread_beside_a_thread_that_keeps_its_own():
    torch.set_num_threads(2)
    pipeline = _CountingPipeline()
    seen_beside = {}
    started, diarized = threading.Event(), threading.Event()

    def beside():  # a thread already using torch (Whisper's), while diarization runs on another
        torch.get_num_threads()
        started.set()
        diarized.wait(10)
        seen_beside["threads"] = torch.get_num_threads()

    neighbour = threading.Thread(target=beside)
    neighbour.start()
    started.wait(10)
    turns = _in_new_thread(lambda: diarize(pipeline, np.zeros(16000, dtype=np.float32), 16000, {}).turns)
    diarized.set()
    neighbour.join()
    assert pipeline.threads_seen == 1
    assert [turn.speaker for turn in turns] == ["SPEAKER_00"]
    assert seen_beside["threads"] == 2
    assert _in_new_thread(torch.get_num_threads) == 2


def test_pyannote_on_another_device_keeps_the_thread_count():
    torch.set_num_threads(2)
    pipeline = _CountingPipeline()
    pipeline.device = torch.device("meta")  # stands for a GPU: only the device type is read
    diarize(pipeline, np.zeros(16000, dtype=np.float32), 16000, {})
    assert pipeline.threads_seen == 2
