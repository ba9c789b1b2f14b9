"""What the start-up check of the embedded model cache costs: ``registry.damage`` per model.

    .venv/bin/python bench/memory/cache_check.py [--out bench-results/cache-check]

Pulls each embedded model if needed, then times the check (size and SHA-256 of every cached
file) three times and prints the median, with the folder's size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results/cache-check"))
    arguments = parser.parse_args(argv)
    from speaker_transcripts.models.registry import REGISTRY, cache_dir, damage, pull

    table = Table("cache-check", (("model", "model", ""), ("size_mb", "MB", ".0f"), ("check_s", "check, median s", ".2f"), ("problem", "found", "")))
    for model in REGISTRY.values():
        pull(model)
        seconds = []
        for _ in range(3):
            started = time.perf_counter()
            problem = damage(model.name)
            seconds.append(time.perf_counter() - started)
        size = sum(path.stat().st_size for path in (cache_dir() / model.name).rglob("*") if path.is_file()) / 1e6
        table.add(model=model.name, size_mb=size, check_s=statistics.median(seconds), problem=problem or "intact")
    table.save(arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
