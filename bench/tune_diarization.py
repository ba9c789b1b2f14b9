"""Sweep the embedded diarization pipeline's settings on every manifest entry with an RTTM.

    .venv/bin/python bench/tune_diarization.py --manifest ../shared/dev-audio/manifest.json \
        [--model pyannote-campplus] [--steps 0.1 0.25] [--strides 1 2] [--shipped] [--out tune.json]

Segmentation and embeddings are computed once per file, segmentation step and embedding stride (pyannote's
training cache), then every clustering setting reuses them. Prints, per setting, the DER over
all their speech (collar 0, first 30 s of each file, as the meeting references are scored) over the real
meetings and over the synthetic conversations, and on how many files the speaker count was
right; the best settings go into ``speaker_transcripts/models/pyannote_pipeline.py``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SCORED_SECONDS = 30.0
GRID = {  # clustering parameters swept
    "min_active_ratio": (0.05, 0.1, 0.2),
    "method": ("centroid", "average"),
    "threshold": (0.5, 0.6, 0.7, 0.8),
    "min_cluster_size": (1, 3, 12),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--model", default="pyannote-campplus", help="embedded name or pipeline folder")
    parser.add_argument("--steps", type=float, nargs="+", default=[0.1], help="segmentation steps (fraction of 10 s)")
    parser.add_argument("--strides", type=int, nargs="+", default=[1], help="embedding strides (chunks; chunk_embeddings.py)")
    parser.add_argument("--shipped", action="store_true", help="only the shipped clustering settings (to compare steps)")
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args(argv)

    import torch
    from pyannote.audio import Pipeline

    torch.set_num_threads(1)  # as the product runs pyannote on CPU (pipeline/cpu_threads.py), for comparable times

    from speaker_transcripts.evaluation.scoring import DiarizationTotals, load_manifest
    from speaker_transcripts.models import registry as models
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_file
    from speaker_transcripts.pipeline.diarization import Turn, turns_from_output

    entries = [entry for entry in load_manifest(arguments.manifest) if entry.turns and entry.audio.suffix == ".wav"]
    entries = [entry for entry in entries if not entry.name.startswith("short_")]
    from speaker_transcripts.models.pyannote_pipeline import PIPELINE_PARAMS, EmbeddedSpeakerDiarization

    loaded = Pipeline.from_pretrained(models.local_path(arguments.model))
    pipeline = EmbeddedSpeakerDiarization(
        segmentation=loaded._segmentation.model, embedding=loaded._embedding.model_,
        embedding_exclude_overlap=loaded.embedding_exclude_overlap, embedding_batch_size=loaded.embedding_batch_size,
        segmentation_batch_size=loaded.segmentation_batch_size,
    )
    pipeline.training = True  # keeps segmentation and embeddings in each file dict between settings
    files = []
    for entry in entries:
        samples = decode_file(entry.audio.read_bytes(), 3600).samples
        files.append({"waveform": torch.from_numpy(samples)[None], "sample_rate": SAMPLING_RATE, "uri": entry.name})

    def speakers(turns: list[Turn]) -> int:
        return len({turn.speaker for turn in turns if turn.start < SCORED_SECONDS})

    rows: list[dict[str, Any]] = []
    for step, stride in itertools.product(arguments.steps, arguments.strides):
        pipeline._segmentation.step = step * pipeline._segmentation.duration
        pipeline.embedding_stride = stride
        for file in files:
            for key in [key for key in file if key.startswith("training_cache")]:
                del file[key]
        seconds = 0.0
        grid = GRID
        if arguments.shipped:
            grid = {name: (value,) for name, value in PIPELINE_PARAMS["clustering"].items()}
        for values in itertools.product(*grid.values()):
            clustering = dict(zip(grid, values, strict=True))
            pipeline.instantiate({"segmentation": PIPELINE_PARAMS["segmentation"], "clustering": clustering})
            per_file = {}
            totals = {"meetings": DiarizationTotals(), "synthetic": DiarizationTotals()}
            for entry, file in zip(entries, files, strict=True):
                started = time.perf_counter()
                turns = turns_from_output(pipeline(file), exclusive=False)
                seconds += time.perf_counter() - started
                total = totals["synthetic" if entry.name.startswith("conv") else "meetings"]
                per_file[entry.name] = {
                    **total.add(entry.turns, turns, SCORED_SECONDS),
                    "speakers": speakers(turns),
                    "reference_speakers": speakers(entry.turns),
                }
            row = {
                "step": step, "stride": stride, **clustering,
                "meetings_der": totals["meetings"].summary()["der"],
                "synthetic_der": totals["synthetic"].summary()["der"],
                "right_count": sum(s["speakers"] == s["reference_speakers"] for s in per_file.values()),
                "files": per_file,
            }
            rows.append(row)
            print(f"step {step:.2f} stride {stride} {clustering}: meetings DER {row['meetings_der']:.3f}"
                  f"  synthetic DER {row['synthetic_der']:.3f}  count right {row['right_count']}/{len(per_file)}", flush=True)
        print(f"step {step} stride {stride}: first setting (segmentation + embeddings) and sweep took {seconds:.0f} s", flush=True)
    best = min(rows, key=lambda row: row["meetings_der"] + row["synthetic_der"])
    print("best:", json.dumps({key: value for key, value in best.items() if key != "files"}))
    for name, score in best["files"].items():
        print(f"  {name:28s} DER {score['der']:.3f} (missed {score['missed_detection']:.3f}, false alarm "
              f"{score['false_alarm']:.3f}, confusion {score['confusion']:.3f}) speakers {score['speakers']}/{score['reference_speakers']}")
    if arguments.out:
        arguments.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
