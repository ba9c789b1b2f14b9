"""Wall time and peak memory against audio length: 1, 5, 10 and 30 minutes by default.

    python bench/speed/scaling.py --asr-model DIR/whisper-base [--minutes 1 5 10 30] [--source FILE ...] [--out bench-results/scaling]

Builds each length by repeating the dev conversations (real speech throughout), then transcribes
it in a fresh process (so peak RSS belongs to that length alone: models + audio + decoding) through
the handler with default parameters, and prints seconds, real-time factor and peak RSS, with the
30-to-5-minute ratios the targets are stated in (time <= 6.5x, RSS <= 1.5x).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table

DEV_AUDIO = ROOT.parent / "shared" / "dev-audio"


def build_audio(sources: list[Path], minutes: float, path: Path) -> None:
    import numpy as np

    from bench.speed.latency import wav_bytes
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    pieces = [as_float32(decode_file(source.read_bytes()).samples) for source in sources]
    speech = np.concatenate(pieces)
    repeats = int(np.ceil(minutes * 60 * 16000 / len(speech)))
    path.write_bytes(wav_bytes(np.tile(speech, repeats)[: int(minutes * 60 * 16000)]))


def measure_one(asr_model: str, audio: Path) -> dict[str, float]:
    """In this (fresh) process: load, transcribe once, report time and this process's peak RSS."""
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.transcriber import Transcriber

    handler = Transcriber(settings=ModelSettings(asr_model=asr_model))
    loaded_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    result = handler({"inputs": audio.read_bytes(), "parameters": {"language": "en"}})
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_after_load_mb": loaded_rss_mb,
        "duration_s": result["duration"],
        "words": len(result["text"].split()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", required=True)
    parser.add_argument("--minutes", type=float, nargs="+", default=[1, 5, 10, 30])
    parser.add_argument("--source", type=Path, nargs="+",
                        default=[DEV_AUDIO / "conv01_standup_2spk.wav", DEV_AUDIO / "conv03_overlap_2spk.wav"])
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: measure this file in this process
    parser.add_argument("--out", type=Path, default=Path("bench-results/scaling"))
    arguments = parser.parse_args()
    if arguments.one:
        print(json.dumps(measure_one(arguments.asr_model, arguments.one)))
        return

    rows = {}
    table = Table("scaling", (("audio", "audio", ""), ("seconds", "seconds", ".1f"), ("rtf", "real-time factor", ".3f"),
                              ("peak_rss_mb", "peak RSS MB", ".0f"), ("rss_after_load_mb", "RSS after model load MB", ".0f"), ("words", "words", "")))
    with tempfile.TemporaryDirectory() as folder:
        for minutes in arguments.minutes:
            audio = Path(folder) / f"{minutes:g}min.wav"
            build_audio(arguments.source, minutes, audio)
            completed = subprocess.run(
                [sys.executable, __file__, "--asr-model", arguments.asr_model, "--one", str(audio)],
                capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            row = rows[minutes] = json.loads(completed.stdout.strip().splitlines()[-1])
            table.add(audio=f"{minutes:g} min", rtf=row["seconds"] / row["duration_s"], **row)
    table.save(arguments.out)
    if 5 in rows and 30 in rows:
        print(f"\n30 min / 5 min: time {rows[30]['seconds'] / rows[5]['seconds']:.2f}x (target <= 6.5), "
              f"peak RSS {rows[30]['peak_rss_mb'] / rows[5]['peak_rss_mb']:.2f}x (target <= 1.5)")


if __name__ == "__main__":
    main()
