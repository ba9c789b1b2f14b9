"""Where the memory goes: resident memory after each stage of a CPU run, ours beside
faster-whisper batched, on the 10-min file of ``bench/speed/long_form.py``'s recipe or, with ``--dense``, on
real speech throughout (the AMI excerpts and the dev speech joined back to back, no pause longer than theirs).

    python bench/memory/memory.py [--asr-model whisper-base] [--fw-python PYTHON] [--minutes 10] [--dense] [--manifest ../shared/dev-audio/manifest.json] [--out bench-results/memory]

How it measures, and what it reports: bench/README.md, ``memory.py``.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table
from bench.speed.long_form import DEV_AUDIO, benchmark_files

DENSE_KINDS = ("real_meeting", "synthetic_conversation", "real_speech")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--fw-python", type=Path, help="a Python with faster-whisper installed (else its rows are left out)")
    parser.add_argument("--manifest", type=Path, default=DEV_AUDIO / "manifest.json")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--dense", action="store_true", help="speech throughout (AMI excerpts and dev speech joined without pauses)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/memory"))
    parser.add_argument("--worker", choices=("ours", "ours-with-speakers", "faster-whisper"), help=argparse.SUPPRESS)
    parser.add_argument("--audio", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model-path", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


class Stages:
    """Reports each stage's resident and peak memory, in MB, as one JSON line on stdout."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._reset_peak()

    def done(self, stage: str) -> None:
        status = process_memory()
        print(json.dumps({"stage": stage, "rss_mb": status["VmRSS"], "stage_peak_mb": status["VmHWM"],
                          "seconds": round(time.perf_counter() - self.started, 1)}), flush=True)
        self.started = time.perf_counter()
        self._reset_peak()

    @staticmethod
    def _reset_peak() -> None:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def dense_file(manifest: Path, out: Path, minutes: float) -> Path:
    """Real speech throughout, ``minutes`` long, saved as 16-kHz ``.npy`` in ``out``: the manifest's
    real recordings (AMI excerpts, dev conversations, read speech) joined back to back,
    round and round (``DENSE_KINDS``); a 16-bit WAV of it beside. Every batch of 30-s windows fills, as on a meeting with no long silence."""
    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file
    from tests.audio_files import pcm_wav

    entries = [entry for entry in load_manifest(manifest) if entry.kind in DENSE_KINDS]
    clips = [as_float32(decode_file(entry.audio.read_bytes()).samples) for entry in entries]
    pieces: list[np.ndarray] = []
    while sum(map(len, pieces)) < minutes * 60 * SAMPLING_RATE:
        pieces.append(clips[len(pieces) % len(clips)])
    out.mkdir(parents=True, exist_ok=True)
    samples = np.concatenate(pieces)[: int(minutes * 60 * SAMPLING_RATE)]
    np.save(out / "dense.npy", samples)
    (out / "dense.wav").write_bytes(pcm_wav(samples))  # the same, for the CLI (docs/performance.md, "Memory")
    return out / "dense.npy"


def process_memory(pid: int | str = "self") -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of a process (this one by default), in MB, from ``/proc``."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def ours_worker(asr_model: str, audio: Path) -> None:
    import speaker_transcripts  # noqa: F401  first, as the CLI and the server import it: its process settings apply

    stages = Stages()
    samples = np.load(audio)
    stages.done("interpreter + numpy + the audio")
    import torch  # noqa: F401

    stages.done("import torch")
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models import registry
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.diarization import load_diarization_pipeline
    from speaker_transcripts.pipeline.transcriber import Transcriber

    stages.done("import the pipeline (transformers, pyannote, ...)")
    handler = Transcriber(settings=ModelSettings(asr_model=asr_model, diarization_model=None))
    stages.done(f"ASR model loaded ({handler.recognizer.precision})")
    inputs = {"inputs": {"array": samples, "sampling_rate": SAMPLING_RATE}, "parameters": {"language": "en"}}
    handler(inputs)
    stages.done("10-min file, ASR alone")
    settings = registry.prepare(ModelSettings(asr_model=asr_model, diarization_model="pyannote-campplus"))
    handler.diarization_pipeline = load_diarization_pipeline(settings, "cpu")
    stages.done("diarization pipeline loaded")
    handler(inputs)
    stages.done("10-min file, with diarization")


def ours_with_speakers_worker(asr_model: str, audio: Path) -> None:
    """The default request in a process of its own, as the CLI runs it: both models loaded, one
    diarized 10-min request (ASR beside diarization, word timestamps for attribution)."""
    import speaker_transcripts  # noqa: F401  first, as in ours_worker

    stages = Stages()
    samples = np.load(audio)
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models import registry
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.transcriber import Transcriber
    from tests.audio_files import pcm_wav  # 16-bit WAV, as a client sends a known speaker's clip

    handler = Transcriber(settings=registry.prepare(ModelSettings(asr_model=asr_model, diarization_model="pyannote-campplus")))
    stages.done("both models loaded (a fresh process)")
    handler({"inputs": {"array": samples, "sampling_rate": SAMPLING_RATE}, "parameters": {"language": "en"}})
    stages.done("10-min file, with diarization")
    clip = {"name": "Reader", "audio": base64.b64encode(pcm_wav(samples[: 15 * SAMPLING_RATE])).decode()}
    handler({"inputs": {"array": samples, "sampling_rate": SAMPLING_RATE}, "parameters": {"language": "en", "known_speakers": [clip]}})
    stages.done("the same, naming one known speaker (a 15-s clip)")


def faster_whisper_worker(ct2_folder: Path, audio: Path) -> None:
    """Runs under ``--fw-python``: imports nothing of this project."""
    import os

    stages = Stages()
    samples = np.load(audio)
    stages.done("interpreter + numpy + the audio")
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    stages.done("import faster_whisper (ctranslate2, onnxruntime, av)")
    batched = BatchedInferencePipeline(WhisperModel(str(ct2_folder), device="cpu", compute_type="int8", cpu_threads=os.cpu_count() or 0))
    stages.done("model loaded (int8)")
    segments, _ = batched.transcribe(samples, language="en", beam_size=1, batch_size=8, without_timestamps=False)
    list(segments)
    stages.done("10-min file, batched with timestamps")


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if arguments.worker == "ours":
        ours_worker(arguments.asr_model, arguments.audio)
        return 0
    if arguments.worker == "ours-with-speakers":
        ours_with_speakers_worker(arguments.asr_model, arguments.audio)
        return 0
    if arguments.worker == "faster-whisper":
        faster_whisper_worker(arguments.model_path, arguments.audio)
        return 0
    if not Path("/proc/self/clear_refs").exists():
        print("this benchmark reads Linux's /proc/self/status; it cannot run here", file=sys.stderr)
        return 2
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs the dev audio (../shared/dev-audio)", file=sys.stderr)
        return 2
    from bench.speed.cpu_speed import ct2_conversion
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models import registry

    audio = (dense_file(arguments.manifest, arguments.out, arguments.minutes) if arguments.dense
             else benchmark_files(arguments.manifest, arguments.out, arguments.minutes)[0]["long"][0])
    commands = {
        system: [sys.executable, __file__, "--worker", system, "--asr-model", arguments.asr_model, "--audio", str(audio)]
        for system in ("ours", "ours-with-speakers")
    }
    if arguments.fw_python is not None:
        model_folder = Path(registry.prepare(ModelSettings(asr_model=arguments.asr_model, diarization_model=None)).asr_model)
        ct2 = ct2_conversion(model_folder, arguments.out / f"ct2-{Path(arguments.asr_model).name}")
        commands["faster-whisper"] = [str(arguments.fw_python), __file__, "--worker", "faster-whisper",
                                      "--model-path", str(ct2), "--audio", str(audio)]
    table = Table("memory", (("system", "system", ""), ("stage", "stage", ""), ("rss_mb", "RSS after, MB", ".0f"),
                             ("stage_peak_mb", "peak during, MB", ".0f"), ("seconds", "s", ".1f")),
                  note=[f"{arguments.asr_model}, {arguments.minutes:g} min of {'speech throughout' if arguments.dense else 'long_form.py recipe'}"])
    for system, command in commands.items():  # one after the other: each peak is its own
        completed = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
        for line in completed.stdout.splitlines():
            if line.startswith("{"):
                table.add(system=system, **json.loads(line))
    table.save(arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
