"""What the start-up check of the embedded model cache costs: ``registry.damage`` per model.

    .venv/bin/python bench/memory/cache_check.py

Pulls each embedded model if needed, then times the check (size and SHA-256 of every cached
file) three times and prints the median, with the folder's size.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from speaker_transcripts.models.registry import REGISTRY, cache_dir, damage, pull

    for model in REGISTRY.values():
        pull(model)
        seconds = []
        for _ in range(3):
            started = time.perf_counter()
            problem = damage(model.name)
            seconds.append(time.perf_counter() - started)
        size = sum(path.stat().st_size for path in (cache_dir() / model.name).rglob("*") if path.is_file()) / 1e6
        print(f"{model.name:20s} {size:6.0f} MB  check {statistics.median(seconds):.2f} s  {problem or 'intact'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
