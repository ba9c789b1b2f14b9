"""What one enrolment costs: ``speaker-transcripts speakers add`` timed as a user runs it.

    .venv/bin/python bench/speed/speakers_add.py [CLIP] [--repeats 3] [--out bench-results/speakers-add]

Each run is a fresh interpreter enrolling CLIP (default ``samples/enrolment/reader-a.wav``) into a
new library with the embedded ``pyannote-campplus``, alternating between what the command does
(CAM++ loaded alone from the pipeline's checkpoint, no pyannote: ``models/campplus_network.py``)
and the way it did it before (the whole pyannote pipeline loaded for its embedding model), so
both meet the same load on a shared machine. Prints the seconds until each of the command's
progress lines and the whole, the median of the repeats, and the ratio; and checks that both ways
wrote the same library file.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))
from bench.results import Table

CLIP = REPOSITORY / "samples" / "enrolment" / "reader-a.wav"

CHILD = """
import sys
from speaker_transcripts.cli import speakers
if sys.argv[3] == "whole-pipeline":  # no checkpoint of its own found: the pipeline is loaded whole
    from speaker_transcripts.pipeline import diarization
    diarization._embedding_checkpoint = lambda folder: None
sys.exit(speakers.main(["--library", sys.argv[1], "add", "Reader", sys.argv[2], "--diarization-model", "pyannote-campplus"]))
"""


def run_once(clip: Path, way: str, library: Path) -> tuple[list[tuple[float, str]], float]:
    """The command's progress lines with the seconds at which each came, and the seconds in all."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(library), str(clip), way], cwd=REPOSITORY,
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines = [(time.perf_counter() - started, line.rstrip()) for line in child.stderr]
    if child.wait() != 0:
        raise SystemExit(f"speakers add failed ({way}): " + " | ".join(line for _, line in lines))
    return lines, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clip", nargs="?", type=Path, default=CLIP)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench-results/speakers-add"))
    arguments = parser.parse_args(argv)
    totals: dict[str, list[float]] = {"campplus-alone": [], "whole-pipeline": []}
    runs = Table("speakers-add-runs", (("way", "way", ""), ("run", "run", ""), ("seconds", "s in all", ".1f"), ("lines", "progress lines (s: line)", "")))
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(arguments.repeats):
            for way, seconds in totals.items():
                lines, total = run_once(arguments.clip, way, Path(scratch) / f"{way}-{repeat}")
                seconds.append(total)
                runs.add(way=way, run=repeat + 1, seconds=total, lines="; ".join(f"{at:.1f}: {line}" for at, line in lines))
        written = {way: {path.read_bytes() for path in Path(scratch).glob(f"{way}-*/*.json")} for way in totals}
    runs.save(arguments.out)
    alone, whole = (statistics.median(totals[way]) for way in totals)
    median = Table("speakers-add", (("alone", "CAM++ alone, median s", ".1f"), ("whole", "whole pipeline, median s", ".1f"),
                                    ("ratio", "whole / alone", ".1f"), ("same", "same library file", "")))
    median.add(alone=alone, whole=whole, ratio=whole / alone,
               same=written["campplus-alone"] == written["whole-pipeline"] and len(written["campplus-alone"]) == 1)
    median.save(arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
