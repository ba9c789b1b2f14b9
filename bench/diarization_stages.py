"""Diarization of a long file, stage by stage: torch threads and embedding strides side by side.

    .venv/bin/python bench/diarization_stages.py [--minutes 10] [--threads 2 1] [--strides 1 3] \
        [--manifest ../shared/dev-audio/manifest.json]

Builds the 10-min file of ``bench/long_form.py``'s recipe and runs the embedded pipeline
(``pyannote-campplus``) on it once per (threads, stride), in this one process: seconds in
segmentation and in embeddings (from pyannote's progress hook), the share of chunks the stride
left unembedded (``models/chunk_embeddings.py``), the speakers found, and the DER of each run's
turns against the first run's (how much a setting changes the answer, not a score against a
reference: the file has none). Run it under ``OMP_WAIT_POLICY=PASSIVE``, as the package sets it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(REPOSITORY / "bench"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--strides", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--manifest", type=Path, default=REPOSITORY.parent / "shared" / "dev-audio" / "manifest.json")
    arguments = parser.parse_args(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: pass --manifest (the long file is built from its speech)")
        return 2

    import torch
    from long_form import build_long_file
    from pyannote.audio import Pipeline
    from pyannote.metrics.diarization import DiarizationErrorRate

    import speaker_transcripts.models.pyannote_pipeline as pipeline_module
    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.models import registry

    samples, _, _ = build_long_file([entry for entry in load_manifest(arguments.manifest) if entry.text], arguments.minutes)
    audio = {"waveform": torch.from_numpy(samples)[None], "sample_rate": 16000}
    pipeline = Pipeline.from_pretrained(registry.local_path("pyannote-campplus"))
    plans = []
    planned = pipeline_module.plan_embeddings

    def recorded_plan(*args: object, **kwargs: object) -> object:
        plans.append(planned(*args, **kwargs))
        return plans[-1]

    pipeline_module.plan_embeddings = recorded_plan  # to report the share of chunks skipped
    print(f"{len(samples) / 16000 / 60:.1f} min; threads, stride: seconds (segmentation + embeddings), skipped chunks, speakers, DER against the first run")
    first = None
    for threads in arguments.threads:
        for stride in arguments.strides:
            torch.set_num_threads(threads)
            pipeline.embedding_stride = stride
            seconds, stages, turns = timed_run(pipeline, audio)
            first = first if first is not None else turns
            change = DiarizationErrorRate()(first, turns)
            print(f"{threads} thread(s), stride {stride}: {seconds:.1f} s ({stages.get('segmentation', 0):.1f} + "
                  f"{stages.get('embeddings', 0):.1f}), {plans[-1].skipped_share:.0%} skipped, "
                  f"{len(turns.labels())} speakers, {change:.3%}", flush=True)
    return 0


def timed_run(pipeline: object, audio: dict) -> tuple[float, dict[str, float], object]:
    """Seconds in all, seconds per pyannote step (from its progress hook), and the diarization."""
    import torch

    stages: dict[str, float] = {}
    marks = [time.perf_counter()]

    def hook(step: str, _artefact: object, file: object = None, total: int | None = None, completed: int | None = None) -> None:
        if completed is None or completed == total:
            stages[step] = stages.get(step, 0.0) + time.perf_counter() - marks[-1]
            marks.append(time.perf_counter())

    with torch.inference_mode():
        turns = pipeline(audio, hook=hook).speaker_diarization
    return time.perf_counter() - marks[0], stages, turns


if __name__ == "__main__":
    sys.exit(main())
