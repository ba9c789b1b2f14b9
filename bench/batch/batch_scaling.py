"""Does the batch command scale with the corpus? Time to the first row, total time, memory and processes.

    .venv/bin/python bench/batch/batch_scaling.py --short 10000 --asr-model whisper-tiny.en
    .venv/bin/python bench/batch/batch_scaling.py --long 100 --long-seconds 60 --asr-model whisper-tiny.en

Builds a corpus in a temporary folder: ``--short`` files of 0.1 s (the clip of ``tests/data``, cut) and/or
``--long`` files of ``--long-seconds`` (that clip repeated), then runs ``speaker-transcripts batch`` on it
(one worker, no diarization: the job's own overhead is what is measured) as a user would, and reports:
seconds until the first row was reported, seconds in all, the peak resident memory of the job's whole
process tree (the driver, Ray's processes and workers, sampled every 0.2 s) and the most processes it
had at once.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CLIP = ROOT / "tests" / "data" / "goforward.wav"


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", type=int, default=0, help="files of 0.1 s")
    parser.add_argument("--long", type=int, default=0, help="files of --long-seconds")
    parser.add_argument("--long-seconds", type=float, default=60.0)
    parser.add_argument("--asr-model", default="whisper-tiny.en")
    return parser.parse_args(argv)


def build_corpus(folder: Path, short: int, long: int, long_seconds: float) -> None:
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    sys.path.insert(0, str(ROOT / "tests"))
    from audio_files import pcm_wav

    speech = as_float32(decode_file(CLIP.read_bytes()).samples)
    tiny = pcm_wav(speech[8000:9600])
    repeated = pcm_wav(np.resize(speech, int(long_seconds * 16000)))
    for index in range(short):
        (folder / f"short-{index:05d}.wav").write_bytes(tiny)
    for index in range(long):
        (folder / f"long-{index:03d}.wav").write_bytes(repeated)


def tree_usage(root: int) -> tuple[float, int]:
    """Resident MB and process count of ``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    rss: dict[int, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = {line.split(":")[0]: line.split(":")[1].split() for line in (proc / "status").read_text().splitlines() if ":" in line}
        except OSError:
            continue
        children.setdefault(int(fields["PPid"][0]), []).append(int(proc.name))
        rss[int(proc.name)] = int(fields.get("VmRSS", ["0"])[0]) / 1024
    tree, stack = [], [root]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack += children.get(pid, [])
    return sum(rss.get(pid, 0.0) for pid in tree), len(tree)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    with tempfile.TemporaryDirectory() as scratch:
        corpus, out = Path(scratch) / "corpus", Path(scratch) / "out"
        corpus.mkdir()
        build_corpus(corpus, arguments.short, arguments.long, arguments.long_seconds)
        command = [str(ROOT / ".venv" / "bin" / "speaker-transcripts"), "batch", str(corpus), "--out", str(out),
                   "--asr-model", arguments.asr_model, "--no-diarize", "--language", "en", "--workers", "1"]
        started = time.monotonic()
        process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        peak = {"mb": 0.0, "processes": 0}
        first_row: list[float] = []

        def sample() -> None:
            while process.poll() is None:
                mb, count = tree_usage(process.pid)
                peak["mb"], peak["processes"] = max(peak["mb"], mb), max(peak["processes"], count)
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for line in process.stderr:
            if line.startswith("[") and not first_row:
                first_row.append(time.monotonic() - started)
        process.wait()
        sampler.join()
        rows = sum(1 for _ in (out / "results.jsonl").open()) if (out / "results.jsonl").exists() else 0
        report = {"short_files": arguments.short, "long_files": arguments.long, "long_seconds": arguments.long_seconds,
                  "exit": process.returncode, "rows": rows, "first_row_s": round(first_row[0], 1) if first_row else None,
                  "total_s": round(time.monotonic() - started, 1), "peak_tree_mb": round(peak["mb"]), "peak_processes": peak["processes"]}
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
