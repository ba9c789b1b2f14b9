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
