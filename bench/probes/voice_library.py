"""The voice library (``speaker-transcripts speakers add``) given what an outsider would: a 100-MB and a
3-hour clip, a file that is not audio, a FIFO, a library it cannot write, two enrolments of one name at
once. Each case runs the command as a user does and records its exit status, its last line, its time and
its peak memory; returns rows for the probe's table plus the failures it saw."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

from probes.server import ROOT

MAX_REFUSAL_S = 60.0  # a refusal that takes longer than this read or decoded what it should not have
MAX_REFUSAL_RSS_MB = 1500  # the command's baseline is about 700 MB (torch and Silero); a clip must not add its size several times


def _long_wav(path: Path, seconds: int, rng: random.Random) -> Path:
    with wave.open(str(path), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(16000)
        for _ in range(0, seconds, 600):
            file.writeframes((np.random.default_rng(rng.randint(0, 2**31)).standard_normal(16000 * 600) * 2000).astype("<i2").tobytes())
    return path


def _enrol(library: Path, name: str, clip: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "speaker_transcripts", "speakers", "--library", str(library), "add", name, str(clip),
                             "--diarization-model", "pyannote-campplus"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def _run(command: subprocess.Popen) -> tuple[int, str, float]:
    """Its exit status, its stderr and its own peak RSS in MB (``wait4``: this child's, not the largest child's so far)."""
    err = command.stderr.read()
    command.stdout.read()
    _, status, usage = os.wait4(command.pid, 0)
    command.returncode = os.waitstatus_to_exitcode(status)
    return command.returncode, err, usage.ru_maxrss / 1024


def voice_library(rng: random.Random) -> tuple[list[tuple], list[str]]:
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        junk = folder / "notes.wav"
        junk.write_bytes(os.urandom(rng.randint(1000, 100_000)))
        os.mkfifo(folder / "pipe.wav")
        (folder / "not-a-folder").write_text("x")
        reader = ROOT / "samples" / "enrolment" / "reader-a.wav"
        cases = [
            ("a 100-MB clip (52 min)", folder / "library", _long_wav(folder / "long.wav", 52 * 60, rng), 2),
            ("a 3-hour clip (345 MB)", folder / "library", _long_wav(folder / "longer.wav", 3 * 3600, rng), 2),
            ("a file that is not audio", folder / "library", junk, 2),
            ("a FIFO", folder / "library", folder / "pipe.wav", 2),
            ("a library it cannot write", folder / "not-a-folder" / "voices", reader, 2),
        ]
        for what, library, clip, expected in cases:
            started = time.monotonic()
            status, err, peak = _run(_enrol(library, "Ann", clip))
            seconds = time.monotonic() - started
            last = err.strip().splitlines()[-1] if err.strip() else ""
            rows.append((what, status, last[:110], f"{seconds:.1f}", f"{peak:.0f}"))
            if status != expected or "Traceback" in err or seconds > MAX_REFUSAL_S or peak > MAX_REFUSAL_RSS_MB:
                failures.append(f"voice library, {what}: exit {status} in {seconds:.1f} s, peak {peak:.0f} MB: {last}")
        library = folder / "shared"
        started = time.monotonic()
        both = [_enrol(library, "Ann", reader), _enrol(library, "Ann", ROOT / "samples" / "enrolment" / "reader-b.wav")]
        outcomes = [_run(run)[:2] for run in both]
        files = sorted(path.name for path in library.glob("*"))
        rows.append(("two enrolments of one name at once", " and ".join(str(code) for code, _ in outcomes),
                     f"library holds {files}", f"{time.monotonic() - started:.1f}", ""))
        if [code for code, _ in outcomes] != [0, 0] or len([name for name in files if name.endswith(".json")]) != 1 or \
                any(not name.endswith(".json") for name in files):
            failures.append(f"voice library, two enrolments of one name: exits {[code for code, _ in outcomes]}, files {files}")
    return rows, failures
