"""Throughput of a corpus: the CLI looping over files in one process, against the batch command
(Ray Data) with 1 and 2 actors, on the same files, side by side in one run.

    .venv/bin/python bench/batch/batch_throughput.py --asr-model whisper-base [--copies 2] [--dev-audio DIR] [--out bench-results/batch-throughput]

The corpus is every WAV of the dev set (``../shared/dev-audio`` by default; give ``--dev-audio``
in a clone without it), each copied ``--copies`` times. Each system runs in its own process with
``OMP_WAIT_POLICY=PASSIVE``; wall time includes loading the models (and starting Ray), as a user
waits for it. Peak RSS is sampled every 0.2 s: the CLI's process, or each Ray actor's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table


def peak_rss_mb(process: subprocess.Popen, marker: str | None) -> dict[str, float]:
    """Peak RSS of ``process`` (no marker) or of every process whose command line has ``marker``."""
    peaks: dict[str, float] = {}
    while process.poll() is None:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if (marker and marker in command) or (not marker and proc.name == str(process.pid)):
                    rss = next(int(line.split()[1]) for line in (proc / "status").read_text().splitlines() if line.startswith("VmRSS:"))
                    peaks[proc.name] = max(peaks.get(proc.name, 0.0), rss / 1024)
            except (OSError, StopIteration):
                continue
        time.sleep(0.2)
    return peaks


def run(command: list[str], marker: str | None) -> tuple[float, dict[str, float], int]:
    environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "DIARIZATION_MODEL": "none"}
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result: dict[str, dict[str, float]] = {}
    watcher = threading.Thread(target=lambda: result.setdefault("peaks", peak_rss_mb(process, marker)))
    watcher.start()
    process.wait()
    watcher.join()
    return time.monotonic() - started, result.get("peaks", {}), process.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--dev-audio", type=Path, default=ROOT.parent / "shared" / "dev-audio")
    parser.add_argument("--out", type=Path, default=Path("bench-results/batch-throughput"))
    arguments = parser.parse_args(argv)
    sources = sorted(arguments.dev_audio.glob("*.wav"))
    if not sources:
        print(f"no WAV files in {arguments.dev_audio}: pass --dev-audio", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from speaker_transcripts.pipeline.audio import decode_file

    audio_s = arguments.copies * sum(decode_file(path.read_bytes()).duration for path in sources)
    command = [str(Path(sys.executable).parent / "speaker-transcripts")]
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch) / "corpus"
        corpus.mkdir()
        for copy in range(arguments.copies):
            for path in sources:
                shutil.copy(path, corpus / f"{copy}-{path.name}")
        files = sorted(str(path) for path in corpus.iterdir())
        systems = {
            "CLI, one process": ([*command, "transcribe", *files, "--asr-model", arguments.asr_model, "--format", "txt",
                                  "--out", f"{scratch}/cli"], None),
            "batch, 1 actor (2 CPUs)": ([*command, "batch", str(corpus), "--out", f"{scratch}/b1", "--asr-model",
                                         arguments.asr_model, "--workers", "1"], "MapWorker"),
            "batch, 2 actors (1 CPU each)": ([*command, "batch", str(corpus), "--out", f"{scratch}/b2", "--asr-model",
                                              arguments.asr_model, "--workers", "2"], "MapWorker"),
        }
        table = Table("batch-throughput", (("system", "system", ""), ("wall_s", "wall s", ".0f"), ("speed", "audio hours per hour", ".1f"),
                                           ("peak_rss_mb", "peak RSS MB (per process)", ""), ("exit", "exit", "")),
                      note=[f"{len(files)} files, {audio_s / 60:.1f} min of audio, {arguments.asr_model}, no diarization"])
        for name, (system, marker) in systems.items():
            wall, peaks, status = run(system, marker)
            table.add(system=name, wall_s=wall, speed=audio_s / wall, exit=status,
                      peak_rss_mb=", ".join(f"{peak:.0f}" for peak in peaks.values()) or None)
        table.save(arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
