"""Hours of audio: time and peak memory of ASR alone, diarization alone, and both, per duration.

    .venv/bin/python bench/long_recording.py [--minutes 10 60 180] [--source samples/two-readers.wav] [--asr-model whisper-base]

Builds each recording by repeating ``--source`` (the committed two-reader sample by default:
two voices, pauses) to the duration, writes it as a 16-kHz WAV, and runs the orchestrator on it in a
fresh interpreter per stage, as the CLI does (decode the file, then the handler on the samples):
``asr`` (``diarize=false``), ``diarization`` (``task=diarize``) and ``both`` (the default
request: diarization beside ASR, word-level attribution). Prints wall seconds (model loading
excluded) and the process's peak RSS (``VmHWM``), so what grows with the hours shows per stage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
STAGES = {"asr": {"diarize": False}, "diarization": {"task": "diarize"}, "both": {}}

CHILD = """
import json, sys, time
from speaker_transcripts import ModelSettings, Transcriber
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_file
settings = ModelSettings.self_hosted().model_copy(update={"asr_model": sys.argv[2], "warmup": False})
transcriber = Transcriber(settings)
started = time.perf_counter()
audio = decode_file(open(sys.argv[1], "rb").read(), settings.max_audio_seconds)
result = transcriber({"inputs": {"array": audio.samples, "sampling_rate": SAMPLING_RATE}, "parameters": json.loads(sys.argv[3])})
seconds = time.perf_counter() - started
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
speakers = len({turn["speaker"] for turn in result.get("diarization", [])})
print(json.dumps({"seconds": seconds, "peak_gb": peak / 1024 / 1024, "speakers": speakers, "words": len(result["text"].split())}))
"""


def build(source: Path, minutes: float, folder: Path) -> Path:
    """``source`` repeated to ``minutes``, as 16-bit PCM WAV (what a recorder writes)."""
    import wave

    import numpy as np

    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_file

    pcm = (np.clip(decode_file(source.read_bytes()).samples, -1, 1) * 32767).astype("<i2").tobytes()
    frames = int(minutes * 60 * SAMPLING_RATE) * 2
    path = folder / f"{source.stem}-{minutes:g}min.wav"
    with wave.open(str(path), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(SAMPLING_RATE)
        for _ in range(frames // len(pcm)):
            writer.writeframes(pcm)
        writer.writeframes(pcm[: frames % len(pcm)])
    return path


def run_stage(path: Path, asr_model: str, parameters: dict) -> dict:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), asr_model, json.dumps(parameters)],
        cwd=REPOSITORY, env=environment, capture_output=True, text=True, check=False,
    )
    if completed.returncode != 0:
        return {"error": completed.stderr.strip().splitlines()[-1] if completed.stderr.strip() else f"exit {completed.returncode}"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[10, 60, 180])
    parser.add_argument("--source", type=Path, default=REPOSITORY / "samples" / "two-readers.wav")
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES))
    arguments = parser.parse_args(argv)
    sys.path.insert(0, str(REPOSITORY))
    print(f"{'minutes':>7} {'stage':12} {'seconds':>8} {'x real time':>11} {'peak RSS GB':>11} {'speakers':>8}")
    with tempfile.TemporaryDirectory(prefix="long-recording-") as folder:
        for minutes in arguments.minutes:
            path = build(arguments.source, minutes, Path(folder))
            for stage in arguments.stages:
                row = run_stage(path, arguments.asr_model, STAGES[stage])
                if "error" in row:
                    print(f"{minutes:7g} {stage:12} failed: {row['error']}", flush=True)
                    continue
                print(f"{minutes:7g} {stage:12} {row['seconds']:8.1f} {row['seconds'] / (minutes * 60):11.3f} "
                      f"{row['peak_gb']:11.2f} {row['speakers']:>8}", flush=True)
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
