"""How many CPU threads torch uses for one stage, without changing it for the others.

The small models (Silero's speech gate, pyannote's segmentation, CAM++ embeddings) run many short
operations, and OpenMP threads that sleep between operations (the passive wait policy the package
sets, ``speaker_transcripts/__init__.py``) pay a wake-up on each, so those stages run faster on one
thread (diarizing a 10-min file: 2.4x; docs/performance.md, Busy machines) and leave the other core
to Whisper beside them. Whisper's decoding loop is such a stage too; its large products (the encoder,
the cross-attention, the vocabulary projection: ``asr._large_products``) run on every core inside it.

torch keeps the count per OS thread once a thread has used it, but a thread that first uses torch
later starts from the last count set anywhere. So the count is restored on leaving, and the parts
that want every core state their own count rather than trusting what a new thread inherited.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from torch import nn


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with ``count`` torch threads on this OS thread, then put back what it had."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def within_threads(module: nn.Module, count: int) -> None:
    """Run every forward of ``module`` on ``count`` torch threads and put back the count it found
    afterwards: a large product (Whisper's encoder, its cross-attention, its vocabulary projection)
    inside a loop of small ones that runs on fewer."""
    found: list[int] = []

    def enter(*_: Any) -> None:
        found.append(torch.get_num_threads())
        torch.set_num_threads(count)

    def leave(*_: Any) -> None:
        torch.set_num_threads(found.pop())

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave, always_call=True)


def one_thread_on_cpu(device: torch.device) -> AbstractContextManager[None]:
    """One torch thread for a small model's stage when it runs on the CPU; nothing changes on a GPU."""
    return torch_threads(1) if device.type == "cpu" else nullcontext()
