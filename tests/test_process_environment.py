"""The package sets OpenMP's passive wait policy for its processes, before torch loads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = "import os, speaker_transcripts, torch; print(os.environ.get('OMP_WAIT_POLICY'))"


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE"), ("passive", "passive")])
def test_passive_wait_policy_unless_the_user_set_one(given: str | None, expected: str) -> None:
    environment = {name: value for name, value in os.environ.items() if name != "OMP_WAIT_POLICY"}
    if given is not None:
        environment["OMP_WAIT_POLICY"] = given
    output = subprocess.run([sys.executable, "-c", PROBE], env=environment, capture_output=True, text=True, check=True)
    assert output.stdout.strip() == expected


def test_a_process_that_loaded_torch_first_keeps_its_own() -> None:
    environment = {name: value for name, value in os.environ.items() if name != "OMP_WAIT_POLICY"}
    probe = "import os, torch, speaker_transcripts; print(os.environ.get('OMP_WAIT_POLICY'))"
    output = subprocess.run([sys.executable, "-c", probe], env=environment, capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "None"


TRITON_PROBE = (
    "import sys, speaker_transcripts, transformers.models.whisper.modeling_whisper, torch.utils.flop_counter; "
    "print('torch._dynamo' in sys.modules, sys.modules.get('triton') is not None)"
)


def test_triton_stays_unloaded_where_no_gpu_can_run_it() -> None:
    """transformers' Whisper imports torch._dynamo, which loads Triton (75 MB resident) when it is
    installed; without a GPU device the package marks it absent before torch loads."""
    from speaker_transcripts import GPU_DEVICE_NODES

    if any(os.path.exists(node) for node in GPU_DEVICE_NODES):
        pytest.skip("this machine has a GPU device, where Triton is kept")
    output = subprocess.run([sys.executable, "-c", TRITON_PROBE], capture_output=True, text=True, check=True)
    assert output.stdout.split() == ["True", "False"]
    assert "triton" not in output.stderr.lower(), "torch's flop counter warns of the Triton left out on purpose"


def test_a_process_that_loaded_torch_first_keeps_triton() -> None:
    from importlib import metadata

    try:
        metadata.distribution("triton")
    except metadata.PackageNotFoundError:
        pytest.skip("Triton is not installed here")
    output = subprocess.run([sys.executable, "-c", "import torch; " + TRITON_PROBE], capture_output=True, text=True, check=True)
    assert output.stdout.split() == ["True", "True"]
