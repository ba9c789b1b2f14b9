"""Each stage's time alone and beside a CPU-busy process, under OpenMP's passive and active wait policies.

    .venv/bin/python bench/speed/busy_machine.py [AUDIO] [--asr-model whisper-base] [--repeats 1] [--policies default libgomp ACTIVE]

A fresh interpreter per run (libgomp reads ``OMP_WAIT_POLICY`` once, when torch loads it) builds
the ``Transcriber`` with the embedded models and times three stages: loading the models, ASR
alone (``diarize=false``) and diarization alone (pyannote on the decoded samples). "busy" runs
the same beside a second process spinning on one core, as a shared machine or a CI neighbour
would. ``default`` is what the product does with no policy set (passive since
``speaker_transcripts/__init__.py`` sets it); ``libgomp`` is OpenMP's own default (the variable
set but empty: threads spin a while, then sleep), what the product did before; ``ACTIVE`` spins always.
AUDIO defaults to the committed sample, looped to one minute.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
SAMPLE = REPOSITORY / "samples" / "two-readers.wav"
POLICY_NAMES = {None: "default", "": "libgomp", "ACTIVE": "ACTIVE"}

CHILD = """
import json, sys, time
started = time.perf_counter()
from speaker_transcripts import ModelSettings, Transcriber
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_file
from speaker_transcripts.pipeline.diarization import diarize
import numpy as np
settings = ModelSettings.self_hosted().model_copy(update={"asr_model": sys.argv[2], "warmup": False})
transcriber = Transcriber(settings)
load = time.perf_counter() - started
samples = decode_file(open(sys.argv[1], "rb").read(), 3600).samples
samples = np.tile(samples, int(np.ceil(60 * SAMPLING_RATE / len(samples))))[: 60 * SAMPLING_RATE]
started = time.perf_counter()
transcriber({"inputs": {"array": samples.tolist(), "sampling_rate": SAMPLING_RATE}, "parameters": {"diarize": False}})
asr = time.perf_counter() - started
started = time.perf_counter()
diarize(transcriber.diarization_pipeline, samples, SAMPLING_RATE, {})
print(json.dumps({"load_s": load, "asr_s": asr, "diarization_s": time.perf_counter() - started}))
"""


def spin() -> None:
    while True:
        pass


def run_once(audio: Path, asr_model: str, policy: str | None, busy: bool) -> dict[str, float]:
    environment = {name: value for name, value in os.environ.items() if name != "OMP_WAIT_POLICY"}
    if policy is not None:
        environment["OMP_WAIT_POLICY"] = policy
    neighbour = multiprocessing.Process(target=spin, daemon=True) if busy else None
    if neighbour is not None:
        neighbour.start()
        time.sleep(0.5)
    try:
        output = subprocess.run(
            [sys.executable, "-c", CHILD, str(audio), asr_model], env=environment, cwd=REPOSITORY,
            capture_output=True, text=True, check=True,
        ).stdout
    finally:
        if neighbour is not None:
            neighbour.terminate()
            neighbour.join()
    return json.loads(output.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("audio", nargs="?", type=Path, default=SAMPLE)
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--policies", nargs="+", choices=list(POLICY_NAMES.values()), default=list(POLICY_NAMES.values()))
    arguments = parser.parse_args(argv)
    print(f"{'policy':8} {'machine':7} {'load s':>7} {'ASR s':>7} {'diarization s':>14}")
    for policy in [policy for policy, name in POLICY_NAMES.items() if name in arguments.policies]:
        alone: dict[str, float] = {}
        for busy in (False, True):
            runs = [run_once(arguments.audio, arguments.asr_model, policy, busy) for _ in range(arguments.repeats)]
            best = {stage: min(run[stage] for run in runs) for stage in runs[0]}
            ratios = ""
            if busy:
                ratios = "  (" + ", ".join(f"{best[stage] / alone[stage]:.1f}x" for stage in best) + " of alone)"
            else:
                alone = best
            print(
                f"{POLICY_NAMES[policy]:8} {'busy' if busy else 'alone':7} {best['load_s']:7.1f} {best['asr_s']:7.1f} "
                f"{best['diarization_s']:14.1f}{ratios}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
