"""What language detection costs when a request sends no language, handler vs bare pipeline.

    python bench/speed/language_detection.py --asr-model DIR/whisper-base [--audio FILE] [--out bench-results/language-detection]

Median of 5 after a warm-up: the bare pipeline without a language (it detects inside generate),
the handler without and with ``language: en``, and ``detect_language`` alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table


def median_seconds(call, runs: int = 5) -> float:
    call()
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", required=True)
    parser.add_argument("--audio", type=Path,
                        default=ROOT.parent / "shared" / "dev-audio" / "librivox_sense_and_sensibility_01_austen_64kb-0870.wav")
    parser.add_argument("--out", type=Path, default=Path("bench-results/language-detection"))
    arguments = parser.parse_args()

    from transformers import pipeline

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.transcriber import Transcriber

    handler = Transcriber(settings=ModelSettings(asr_model=arguments.asr_model))
    bare = pipeline("automatic-speech-recognition", model=arguments.asr_model)
    data = arguments.audio.read_bytes()
    samples = as_float32(decode_file(data).samples)
    bare_s = median_seconds(lambda: bare({"raw": samples, "sampling_rate": 16000}, chunk_length_s=30, batch_size=24,
                                         return_timestamps=True, generate_kwargs={"num_beams": 1, "do_sample": False}))
    detected_s = median_seconds(lambda: handler({"inputs": data, "parameters": {}}))
    given_s = median_seconds(lambda: handler({"inputs": data, "parameters": {"language": "en"}}))
    detect_s = median_seconds(lambda: handler.recognizer.detect_language(samples))
    table = Table("language-detection", (("bare", "bare, no language s", ".2f"), ("detected", "handler, no language s", ".2f"),
                                         ("ratio", "handler / bare", ".3f"), ("given", "handler, language=en s", ".2f"),
                                         ("detect", "detect_language alone s", ".2f")), note=[f"audio {arguments.audio.name}, medians"])
    table.add(bare=bare_s, detected=detected_s, ratio=detected_s / bare_s, given=given_s, detect=detect_s)
    table.save(arguments.out)


if __name__ == "__main__":
    main()
