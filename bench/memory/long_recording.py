"""Hours of audio: time and peak memory of ASR alone, diarization alone, and both, per duration.

    .venv/bin/python bench/memory/long_recording.py [--minutes 10 60 180] [--source samples/two-readers.wav] [--asr-model whisper-base] \
        [--stages asr diarization both] [--rss-plot rss.png]

Builds each recording by repeating ``--source`` (the committed two-reader sample by default:
two voices, pauses) to the duration, writes it as a 16-kHz WAV, and runs the orchestrator on it in a
fresh interpreter per stage, as the CLI does (decode the file, then the handler on the samples):
``asr`` (``diarize=false``), ``diarization`` (``task=diarize``) and ``both`` (the default
request: diarization beside ASR, word-level attribution). Prints wall seconds (model loading
excluded) and the process's peak RSS (``VmHWM``), so what grows with the hours shows per stage.
The child's resident memory is also read once a second from ``/proc``; ``--rss-plot`` draws it
over the run (one line per duration and stage, with the series beside it as JSON): whether memory
stays flat once the file is decoded, or grows with the hours.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))
from bench.memory.memory import process_memory

STAGES = {"asr": {"diarize": False}, "diarization": {"task": "diarize"}, "both": {}}

CHILD = """
import json, sys, time
from speaker_transcripts import ModelSettings, Transcriber
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file
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

    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file

    pcm = (np.clip(as_float32(decode_file(source.read_bytes()).samples), -1, 1) * 32767).astype("<i2").tobytes()
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
    """One stage in a fresh interpreter: its result line, and ``rss`` ([seconds, MB] once a second)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), asr_model, json.dumps(parameters)],
            cwd=REPOSITORY, env=environment, stdout=out, stderr=err, text=True,
        )
        rss = _sampled_rss(child)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if child.returncode != 0:
        return {"error": stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {child.returncode}"}
    return {**json.loads(stdout.strip().splitlines()[-1]), "rss": rss}


def _sampled_rss(child: subprocess.Popen, every_s: float = 1.0) -> list[list[float]]:
    """``child``'s resident memory (``VmRSS``, MB) once every ``every_s`` until it exits."""
    started = time.monotonic()
    series: list[list[float]] = []
    while child.poll() is None:
        try:
            resident = process_memory(child.pid)["VmRSS"]
        except (FileNotFoundError, ProcessLookupError, KeyError):  # it exited between the poll and the read
            break
        series.append([round(time.monotonic() - started, 1), round(resident)])
        try:
            child.wait(timeout=every_s)
        except subprocess.TimeoutExpired:
            pass
    child.wait()
    return series


def plot_rss(runs: dict[str, list[list[float]]], destination: Path, x_label: str = "minutes into the run (model loading included)") -> None:
    """Resident memory over each run (``[minutes, MB]`` pairs), with the series as JSON beside the picture."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4))
    for label, series in runs.items():
        axes.plot([minutes for minutes, _ in series], [mb / 1024 for _, mb in series], label=label)
    axes.set_xlabel(x_label)
    axes.set_ylabel("resident memory, GiB")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(destination, dpi=100)
    destination.with_suffix(".json").write_text(json.dumps(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[10, 60, 180])
    parser.add_argument("--source", type=Path, default=REPOSITORY / "samples" / "two-readers.wav")
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES))
    parser.add_argument("--rss-plot", type=Path, help="a PNG of resident memory over each run (the series beside it as .json)")
    arguments = parser.parse_args(argv)
    runs: dict[str, list[list[float]]] = {}
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
                runs[f"{minutes:g} min, {stage}"] = [[seconds / 60, mb] for seconds, mb in row["rss"]]
            path.unlink()
    if arguments.rss_plot is not None and runs:
        plot_rss(runs, arguments.rss_plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
