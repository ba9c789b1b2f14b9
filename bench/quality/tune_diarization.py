"""Sweep the embedded diarization pipeline's settings on every manifest entry with an RTTM.

    .venv/bin/python bench/quality/tune_diarization.py --manifest ../shared/dev-audio/manifest.json [--model pyannote-campplus|pyannote-community1] [--steps 0.1 0.25] [--strides 1 2] [--speech-biases 0 1] [--overlap-biases 0 1] [--counts hard soft] [--assignments free constrained] [--shipped] [--out tune.json]

How it measures, and what it reports: bench/README.md, ``tune_diarization.py``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pyannote.audio import Inference
from pyannote.audio.utils.powerset import Powerset
from pyannote.core import SlidingWindowFeature

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from speaker_transcripts.models.pyannote_pipeline import EmbeddedSpeakerDiarization

SCORED_SECONDS = 30.0
GRIDS = {  # clustering parameters swept, by the pipeline's clustering
    "AgglomerativeClustering": {
        "min_active_ratio": (0.05, 0.1, 0.2),
        "method": ("centroid", "average"),
        "threshold": (0.5, 0.6, 0.7, 0.8),
        "min_cluster_size": (1, 3, 12),
    },
    "VBxClustering": {  # community-1's: threshold 0.6, Fa 0.07, Fb 0.8 (pyannote-community1)
        "threshold": (0.4, 0.5, 0.6, 0.7),
        "Fa": (0.07, 0.2, 0.4),
        "Fb": (0.8, 2.0, 6.0),
    },
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, nargs="+", required=True, help="one or more (bench/quality/quick_conversations.py writes one)")
    parser.add_argument("--model", default="pyannote-campplus", help="embedded name or pipeline folder")
    parser.add_argument("--steps", type=float, nargs="+", default=[0.1], help="segmentation steps (fraction of 10 s)")
    parser.add_argument("--strides", type=int, nargs="+", default=[1], help="embedding strides (chunks; chunk_embeddings.py)")
    parser.add_argument("--speech-biases", type=float, nargs="+", default=[0.0], help="non-speech log-probability lowered by")
    parser.add_argument("--overlap-biases", type=float, nargs="+", default=[0.0], help="two-voice log-probabilities raised by")
    parser.add_argument("--counts", nargs="+", choices=("hard", "soft"), default=["hard"], help="instantaneous speaker count")
    parser.add_argument("--assignments", nargs="+", choices=("free", "constrained"), default=["free"])
    parser.add_argument("--shipped", action="store_true", help="only the shipped clustering settings (to compare steps)")
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args(argv)

    from pyannote.audio import Pipeline

    torch.set_num_threads(1)  # as the product runs pyannote on CPU (pipeline/cpu_threads.py), for comparable times

    from speaker_transcripts.evaluation.scoring import DiarizationTotals, load_manifest
    from speaker_transcripts.models import registry as models
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file
    from speaker_transcripts.pipeline.diarization import Turn, turns_from_output

    entries = [entry for manifest in arguments.manifest for entry in load_manifest(manifest) if entry.turns and entry.audio.suffix == ".wav"]
    entries = [entry for entry in entries if not entry.name.startswith("short_")]
    loaded = Pipeline.from_pretrained(models.local_path(arguments.model))
    pipeline = _CountVariants(
        segmentation=loaded._segmentation.model, embedding=loaded._embedding.model_, clustering=loaded.klustering,
        plda=loaded._plda, embedding_exclude_overlap=loaded.embedding_exclude_overlap,
        embedding_batch_size=loaded.embedding_batch_size, segmentation_batch_size=loaded.segmentation_batch_size,
    )
    shipped = loaded.parameters(instantiated=True)  # the folder's settings (config.yaml's params)
    pipeline.training = True  # keeps segmentation and embeddings in each file dict between settings
    specifications = pipeline._segmentation.model.specifications
    powerset = Powerset(len(specifications.classes), specifications.powerset_max_classes)
    pipeline._segmentation.conversion = _HardAndExpected(powerset)
    overlapping = powerset.mapping.sum(dim=1) > 1  # the powerset classes where several voices speak
    bias = {"non_speech": 0.0, "overlap": 0.0}

    def bias_powerset(_module: torch.nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
        output = output.clone()
        output[..., 0] -= bias["non_speech"]  # class 0 of the powerset is "nobody speaks"
        output[..., overlapping] += bias["overlap"]
        return output

    pipeline._segmentation.model.register_forward_hook(bias_powerset)
    files = []
    for entry in entries:
        samples = as_float32(decode_file(entry.audio.read_bytes(), 3600).samples)
        files.append({"waveform": torch.from_numpy(samples)[None], "sample_rate": SAMPLING_RATE, "uri": entry.name})

    def speakers(turns: list[Turn]) -> int:
        return len({turn.speaker for turn in turns if turn.start < SCORED_SECONDS})

    rows: list[dict[str, Any]] = []
    settings = itertools.product(arguments.steps, arguments.strides, arguments.speech_biases, arguments.overlap_biases)
    for step, stride, speech_bias, overlap_bias in settings:
        pipeline._segmentation.step = step * pipeline._segmentation.duration
        pipeline.embedding_stride = stride
        bias["non_speech"], bias["overlap"] = speech_bias, overlap_bias
        for file in files:
            for key in [key for key in file if key.startswith("training_cache")]:
                del file[key]
        seconds = 0.0
        grid = GRIDS[loaded.klustering]
        if arguments.shipped:
            grid = {name: (value,) for name, value in shipped["clustering"].items()}
        for count, assignment, values in itertools.product(arguments.counts, arguments.assignments, itertools.product(*grid.values())):
            pipeline.soft_count = count == "soft"
            pipeline.clustering.constrained_assignment = assignment == "constrained"
            clustering = dict(zip(grid, values, strict=True))
            pipeline.instantiate({"segmentation": shipped["segmentation"], "clustering": clustering})
            per_file = {}
            totals = {group: DiarizationTotals() for group in dict.fromkeys(map(_group, entries))}
            for entry, file in zip(entries, files, strict=True):
                started = time.perf_counter()
                turns = turns_from_output(pipeline(file), exclusive=False)
                seconds += time.perf_counter() - started
                total = totals[_group(entry)]
                per_file[entry.name] = {
                    **total.add(entry.turns, turns, SCORED_SECONDS),
                    "speakers": speakers(turns),
                    "reference_speakers": speakers(entry.turns),
                }
            row = {
                "step": step, "stride": stride, "speech_bias": speech_bias, "overlap_bias": overlap_bias, "count": count, "assignment": assignment, **clustering,
                **{f"{group}_der": total.summary()["der"] for group, total in totals.items()},
                **{f"{group}_count_right": sum(
                    per_file[entry.name]["speakers"] == per_file[entry.name]["reference_speakers"] for entry in entries if _group(entry) == group
                ) for group in totals},
                "right_count": sum(s["speakers"] == s["reference_speakers"] for s in per_file.values()),
                "files": per_file,
            }
            rows.append(row)
            scores = "  ".join(f"{group} DER {row[f'{group}_der']:.3f} count {row[f'{group}_count_right']}" for group in totals)
            print(f"step {step:.2f} stride {stride} speech bias {speech_bias:g} overlap bias {overlap_bias:g} {count} count {assignment} {clustering}: "
                  f"{scores}  count right {row['right_count']}/{len(per_file)}", flush=True)
        print(f"step {step} stride {stride} speech bias {speech_bias:g} overlap bias {overlap_bias:g}: first setting (segmentation + embeddings) and sweep "
              f"took {seconds:.0f} s", flush=True)
    best = min(rows, key=lambda row: sum(row[f"{group}_der"] for group in dict.fromkeys(map(_group, entries))))
    print("best:", json.dumps({key: value for key, value in best.items() if key != "files"}))
    for name, score in best["files"].items():
        print(f"  {name:28s} DER {score['der']:.3f} (missed {score['missed_detection']:.3f}, false alarm "
              f"{score['false_alarm']:.3f}, confusion {score['confusion']:.3f}) speakers {score['speakers']}/{score['reference_speakers']}")
    if arguments.out:
        arguments.out.write_text(json.dumps(rows, indent=1))
    return 0


def _group(entry: Any) -> str:
    """Scored apart: real meetings, the synthetic dev conversations, bench/quality/quick_conversations.py's."""
    return {"synthetic_conversation": "synthetic", "quick_conversation": "quick", "one_voice": "solo"}.get(entry.kind, "meetings")


class _HardAndExpected(torch.nn.Module):
    """The segmentation's powerset output as pyannote converts it (hard multi-label), plus one more
    channel: the expected number of voices per frame from the soft output, for ``--counts soft``."""

    def __init__(self, powerset: Powerset) -> None:
        super().__init__()
        self.powerset = powerset

    def forward(self, output: torch.Tensor) -> torch.Tensor:
        expected = self.powerset.to_multilabel(output, soft=True).sum(dim=-1, keepdim=True)
        return torch.cat([self.powerset.to_multilabel(output), expected], dim=-1)


class _CountVariants(EmbeddedSpeakerDiarization):
    """The shipped pipeline, reading ``_HardAndExpected``'s extra channel: counted from it when
    ``soft_count``, else as pyannote counts (from the hard segmentation)."""

    soft_count = False

    def get_segmentations(self, file: Any, hook: Any = None) -> SlidingWindowFeature:
        both = super().get_segmentations(file, hook=hook)
        self._expected_voices = SlidingWindowFeature(both.data[..., -1:], both.sliding_window)
        return SlidingWindowFeature(both.data[..., :-1], both.sliding_window)

    def speaker_count(self, binarized: SlidingWindowFeature, frames: Any, warm_up: tuple[float, float] = (0.0, 0.0)) -> SlidingWindowFeature:
        if not self.soft_count:
            return super().speaker_count(binarized, frames, warm_up=warm_up)
        count = Inference.aggregate(Inference.trim(self._expected_voices, warm_up=warm_up), frames,
                                    hamming=False, missing=0.0, skip_average=False)
        count.data = np.rint(count.data).astype(np.uint8)
        return count


if __name__ == "__main__":
    sys.exit(main())
