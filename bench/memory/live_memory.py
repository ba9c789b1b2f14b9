"""A live session's memory over an hour: resident memory sampled while one long recording is streamed.

    python bench/memory/live_memory.py [--minutes 60] [--speed 4] [--no-diarize] [--asr-model whisper-base] \
        [--manifest ../shared/dev-audio/manifest.json] [--out bench-results/live-memory]

The dev conversations, joined and repeated to ``--minutes`` of audio, are streamed into one live
session (``live/session.py``, as ``bench/live.py`` streams them: 100-ms appends at ``--speed`` x real
time, the session taking what arrived while it was busy, shedding interim decodes while behind).
The process's resident memory (``VmRSS``) is read every 2 s. Reported: RSS once the session has
run 5 minutes of audio, at the end and at its peak, and the growth over the second half of the run
(MB per 10 minutes of audio); the series and a plot go to ``--out``. Flat means the session holds
what it needs for the turn at hand and its speakers, not the hour behind it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.live import DEV_AUDIO, stream
from bench.memory.long_recording import plot_rss
from bench.memory.memory import process_memory


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--manifest", type=Path, default=DEV_AUDIO / "manifest.json")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--speed", type=float, default=4.0, help="pace over real time")
    parser.add_argument("--no-diarize", dest="diarize", action="store_false")
    parser.add_argument("--out", type=Path, default=Path("bench-results/live-memory"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs ../shared/dev-audio (the dev conversations)", file=sys.stderr)
        return 2
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.live.capacity import live_capacity
    from speaker_transcripts.live.session import LiveConfig, LiveSession
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file
    from speaker_transcripts.pipeline.transcriber import Transcriber

    entries = [entry for entry in load_manifest(arguments.manifest) if entry.kind == "synthetic_conversation"]
    joined = np.concatenate([as_float32(decode_file(entry.audio.read_bytes()).samples) for entry in entries])
    samples = np.tile(joined, int(np.ceil(arguments.minutes * 60 * SAMPLING_RATE / len(joined))))[: int(arguments.minutes * 60 * SAMPLING_RATE)]
    handler = Transcriber(ModelSettings(asr_model=arguments.asr_model,
                                        diarization_model="pyannote-campplus" if arguments.diarize else None))
    lookahead = live_capacity(handler.capabilities.fast_encoder).lookahead_s
    session = LiveSession(handler, LiveConfig(language="en", diarize=arguments.diarize, lookahead_s=lookahead))

    series: list[list[float]] = []  # [minutes of audio streamed, MB]
    started = time.monotonic()
    finished = threading.Event()

    def sample() -> None:
        while not finished.wait(2.0):
            series.append([round((time.monotonic() - started) * arguments.speed / 60, 2), round(process_memory()["VmRSS"])])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = stream(session, samples, arguments.speed)
    finished.set()
    sampler.join()

    second_half = [(minutes, mb) for minutes, mb in series if minutes >= arguments.minutes / 2]
    slope = float(np.polyfit(*zip(*second_half), 1)[0]) * 10 if len(second_half) >= 2 else float("nan")
    after_five = next((mb for minutes, mb in series if minutes >= 5), None)
    row = {
        "minutes": arguments.minutes, "speed": arguments.speed, "diarize": arguments.diarize,
        "rss_after_5_min_mb": after_five, "rss_end_mb": series[-1][1] if series else None,
        "rss_peak_mb": max((mb for _, mb in series), default=None),
        "growth_second_half_mb_per_10_min": round(slope, 1),
        "wall_over_audio": round(result["wall_s"] * arguments.speed / (len(samples) / SAMPLING_RATE), 2),
        "backlog_peak_s": round(result["backlog_peak_s"], 1), "behind_reports": result["behind_reports"],
        "turns": len(result["completed"]),
    }
    print(json.dumps(row), flush=True)
    arguments.out.mkdir(parents=True, exist_ok=True)
    name = f"live-memory-{arguments.asr_model}{'' if arguments.diarize else '-no-diarize'}"
    (arguments.out / f"{name}-summary.json").write_text(json.dumps(row, indent=2))  # the plot writes the series as {name}.json
    label = f"{arguments.minutes:g} min at {arguments.speed:g}x, {'with speakers' if arguments.diarize else 'text only'}"
    plot_rss({label: series}, arguments.out / f"{name}.png", x_label="minutes of audio streamed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
