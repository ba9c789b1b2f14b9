"""In-process latency, side by side: bare pipeline vs the handler's paths, short and long audio.

    python bench/speed/latency.py --asr-model DIR/whisper-base --assistant-model DIR/whisper-base-draft2 \
        [--diarization-model DIR] [--short FILE] [--long FILE ...] [--runs 3] [--out bench-results/latency]

For each clip, after one warm-up call each, the median of ``--runs`` for: the bare transformers
pipeline (greedy, batch 24, segment timestamps, the same 16 kHz samples); the handler forced
not-assisted, forced assisted, on ``auto``; and the handler with diarization when a model is given.
Every system is timed in the same process and the same run, so ratios are like for like. The
long clip defaults to the dev stand-up conversation plus the short clip (>= 60 s).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table

DEV_AUDIO = ROOT.parent / "shared" / "dev-audio"


def median_seconds(call: Callable[[], Any], runs: int) -> float:
    call()  # warm-up: first calls pay for lazy initialisation
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def wav_bytes(samples: np.ndarray) -> bytes:
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1), writer.setsampwidth(2), writer.setframerate(16000)
        writer.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", required=True)
    parser.add_argument("--assistant-model", required=True)
    parser.add_argument("--diarization-model")
    parser.add_argument("--short", type=Path, default=DEV_AUDIO / "librivox_sense_and_sensibility_01_austen_64kb-0870.wav")
    parser.add_argument("--long", type=Path, nargs="+", default=[DEV_AUDIO / "conv01_standup_2spk.wav", DEV_AUDIO / "goforward.wav"],
                        help="files concatenated into the long clip")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--language", default="en")
    parser.add_argument("--out", type=Path, default=Path("bench-results/latency"))
    arguments = parser.parse_args()

    import torch
    from transformers import pipeline

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.transcriber import Transcriber

    handler = Transcriber(settings=ModelSettings(
        asr_model=arguments.asr_model, assistant_model=arguments.assistant_model, diarization_model=arguments.diarization_model,
    ))
    recognizer = handler.recognizer
    bare = pipeline("automatic-speech-recognition", model=arguments.asr_model, device=recognizer.device, dtype=recognizer.dtype)
    generate_kwargs = {"num_beams": 1, "do_sample": False}
    if recognizer.capabilities.multilingual:
        generate_kwargs.update(language=arguments.language, task="transcribe")

    clips = {
        "short": as_float32(decode_file(arguments.short.read_bytes()).samples),
        "long": np.concatenate([as_float32(decode_file(path.read_bytes()).samples) for path in arguments.long]),
    }
    table = Table("latency", (("clip", "clip", ""), ("seconds", "s", ".1f"), ("bare", "bare", ".2f"), ("plain", "handler not assisted", ".2f"),
                              ("assisted", "handler assisted", ".2f"), ("auto", "handler auto", ".2f"), ("auto_path", "auto's path", ""),
                              ("diarized", "handler + diarization", ".2f"), ("overhead", "overhead vs bare", ".3f"),
                              ("auto_vs_best", "auto vs best", ".3f")),
                  note=[(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
                        f"device {recognizer.device}, {recognizer.dtype}; threads {torch.get_num_threads()}"),
                        f"models: ASR {arguments.asr_model}, assistant {arguments.assistant_model}, diarization {arguments.diarization_model}",
                        f"runs: median of {arguments.runs} after one warm-up; seconds"])
    for name, samples in clips.items():
        data = wav_bytes(samples)

        def bare_call(samples: np.ndarray = samples) -> Any:
            with torch.inference_mode():
                return bare({"raw": samples, "sampling_rate": 16000}, chunk_length_s=30, batch_size=24,
                            return_timestamps=True, generate_kwargs=generate_kwargs)

        def handler_call(assisted: Any, diarize: bool = False, data: bytes = data) -> dict[str, Any]:
            return handler({"inputs": data, "parameters": {"language": arguments.language, "assisted": assisted, "diarize": diarize}})

        seconds = {
            "bare": median_seconds(bare_call, arguments.runs),
            "plain": median_seconds(lambda: handler_call(False), arguments.runs),
            "assisted": median_seconds(lambda: handler_call(True), arguments.runs),
            "auto": median_seconds(lambda: handler_call("auto"), arguments.runs),
        }
        auto_path = handler_call("auto")["decoding"]
        diarized = None
        if handler.diarization_pipeline is not None:
            diarized = median_seconds(lambda: handler_call("auto", diarize=True), arguments.runs)
        table.add(clip=name, seconds=len(samples) / 16000, **seconds, auto_path=auto_path, diarized=diarized,
                  overhead=seconds["plain"] / seconds["bare"], auto_vs_best=seconds["auto"] / min(seconds["plain"], seconds["assisted"]))
    table.save(arguments.out)


if __name__ == "__main__":
    main()
