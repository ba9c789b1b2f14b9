"""The live diarizer alone on every file with an RTTM, for each clustering setting: speaker counts and DER.

    .venv/bin/python bench/quality/live_clustering.py [--distances 0.6 0.7 0.8 0.9] [--min-speech 0.25]
        [--manifest ../shared/dev-audio/manifest.json] [--out bench-results/live-clustering]

Only the step grid's windows teach the live clustering (``live/speakers.py``), so the speakers a session
finds are the diarizer's on the grid, whatever Whisper does beside it and however busy the machine is:
replaying the diarizer alone, once per setting, gives the live timeline's count and DER in seconds a file.
Reported per set (``ami-tuning`` trn00-05, on which settings are chosen, and ``held-out``, the other AMI
excerpts and the dev conversations): files whose count is right, each file's count minus the reference's,
and the pooled DER (pyannote.metrics, overlap scored, no collar).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table

TUNING = {f"trn{index:02d}" for index in range(6)}  # bench/live.py's AMI_TUNING


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distances", type=float, nargs="+", default=[0.6, 0.7, 0.8, 0.9], help="new_speaker_distance values")
    parser.add_argument("--min-speech", type=float, nargs="+", default=[0.25], help="min_new_speech values")
    parser.add_argument("--manifest", type=Path, default=ROOT.parent / "shared" / "dev-audio" / "manifest.json")
    parser.add_argument("--out", type=Path, default=Path("bench-results/live-clustering"))
    arguments = parser.parse_args(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs ../shared/dev-audio", file=sys.stderr)
        return 2

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import DiarizationTotals, load_manifest
    from speaker_transcripts.live.clustering import ClusteringSettings, OnlineClustering
    from speaker_transcripts.live.speakers import LiveDiarizer
    from speaker_transcripts.models import registry
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.diarization import load_diarization_pipeline

    settings = registry.prepare(ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus"))  # embedded names as folders
    pipeline = load_diarization_pipeline(settings, "cpu")
    entries = [entry for entry in load_manifest(arguments.manifest)
               if entry.kind in ("real_meeting", "synthetic_conversation") and entry.turns]
    rows = []
    for setting in [ClusteringSettings(new_speaker_distance=distance, min_new_speech=share)
                    for distance in arguments.distances for share in arguments.min_speech]:
        totals = {"ami-tuning": DiarizationTotals(), "held-out": DiarizationTotals()}
        counts: dict[str, list[int]] = {"ami-tuning": [], "held-out": []}
        for entry in entries:
            samples = as_float32(decode_file(entry.audio.read_bytes()).samples)
            diarizer = LiveDiarizer(pipeline, OnlineClustering(setting), 16000)
            turns = diarizer.advance(lambda start, end, samples=samples: samples[max(start, 0) : end], len(samples), final=True)
            part = "ami-tuning" if entry.audio.stem in TUNING else "held-out"
            totals[part].add(entry.turns, turns, len(samples) / 16000)
            counts[part].append(len({turn.speaker for turn in turns}) - len({turn.speaker for turn in entry.turns}))
        for part, total in totals.items():
            rows.append({"set": part, "new_speaker_distance": setting.new_speaker_distance, "min_new_speech": setting.min_new_speech,
                         "count_right": f"{counts[part].count(0)}/{len(counts[part])}", "count_off_by": counts[part],
                         "der": round(total.summary()["der"], 4)})
            print(json.dumps(rows[-1]), flush=True)
    table = Table("live-clustering", (("set", "set", ""), ("new_speaker_distance", "new_speaker_distance", ""),
                                      ("min_new_speech", "min_new_speech", ""), ("count_right", "count right", ""),
                                      ("count_off_by", "count off by (per file)", ""), ("der", "DER", ".1%")))
    table.rows = rows
    print(f"\n{table.markdown()}")
    table.save(arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
