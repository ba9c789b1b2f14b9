"""Peak memory and time of single requests at the edges of the documented parameter ranges.

    python bench/memory/request_cost.py [--asr-model whisper-tiny.en] [--case NAME ...] [--out bench-results/request-cost]

Each case runs in its own process (peak RSS is a process-wide high-water mark): load the handler
(no diarization, warm-up on), note the RSS, send one request, report the peak RSS above that idle
figure, the seconds taken, and the decoding the handler reports (with any warning about limits).
Audio: the committed two-reader sample (10.9 s of speech), tiled for longer cases.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table

SAMPLE = ROOT / "samples" / "two-readers.wav"

CASES: dict[str, tuple[float, dict]] = {  # name: (seconds of audio, parameters)
    "defaults, 10 s": (10.9, {}),
    "defaults + word timestamps, 10 s": (10.9, {"return_timestamps": "word"}),
    "chunk 1 s, batch 256, word, 10 s": (10.9, {"chunk_length_s": 1, "batch_size": 256, "return_timestamps": "word"}),
    "chunked, chunk 1 s, batch 256, word, 10 s": (
        10.9, {"long_form": "chunked", "chunk_length_s": 1, "batch_size": 256, "return_timestamps": "word"},
    ),
    "16 beams + word, 30 s": (30.0, {"num_beams": 16, "return_timestamps": "word"}),
    "batch 256, word, 120 s": (120.0, {"batch_size": 256, "return_timestamps": "word"}),
    "16 beams, batch 256, 120 s": (120.0, {"num_beams": 16, "batch_size": 256}),
    "chunk 2 s, 16 beams + word, 60 s": (60.0, {"chunk_length_s": 2, "num_beams": 16, "return_timestamps": "word"}),
}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(name: str, asr_model: str) -> dict:
    import numpy as np

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file
    from speaker_transcripts.pipeline.transcriber import Transcriber

    seconds, parameters = CASES[name]
    speech = as_float32(decode_file(SAMPLE.read_bytes()).samples)
    samples = np.resize(speech, int(seconds * SAMPLING_RATE))
    handler = Transcriber(settings=ModelSettings(asr_model=asr_model, diarization_model=None))
    handler({"inputs": {"array": speech[:SAMPLING_RATE * 2], "sampling_rate": SAMPLING_RATE}})  # lazy init outside the peak
    idle = rss_mb()
    started = time.perf_counter()
    result = handler({"inputs": {"array": samples, "sampling_rate": SAMPLING_RATE}, "parameters": {"language": "en", **parameters}})
    return {
        "case": name, "idle_mb": round(idle), "peak_above_idle_mb": round(rss_mb() - idle),
        "seconds": round(time.perf_counter() - started, 1), "decoding": result["decoding"],
        "warnings": [warning for warning in result["warnings"] if "limit" in warning or "reduced" in warning],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-tiny.en")
    parser.add_argument("--case", action="append", choices=list(CASES))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("bench-results/request-cost"))
    arguments = parser.parse_args(argv)
    if arguments.worker:
        print(json.dumps(run_case(arguments.worker, arguments.asr_model)))
        return 0
    table = Table("request-cost", (("case", "case", ""), ("idle_mb", "idle RSS MB", ""), ("peak_above_idle_mb", "peak above idle MB", ""),
                                   ("seconds", "s", ""), ("decoding", "decoding", ""), ("warnings", "limit warnings", ""), ("failed", "failed", "")))
    for name in arguments.case or list(CASES):
        completed = subprocess.run(
            [sys.executable, __file__, "--worker", name, "--asr-model", arguments.asr_model],
            capture_output=True, text=True, check=False, cwd=ROOT,
        )
        if completed.returncode != 0:
            table.add(case=name, failed=(completed.stderr.strip().splitlines() or ["exit " + str(completed.returncode)])[-1])
            continue
        row = json.loads(completed.stdout.strip().splitlines()[-1])
        table.add(case=name, **{**row, "warnings": "; ".join(row["warnings"])})
    table.save(arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
