"""Diarization beside ASR vs one after the other, on a pyannote pipeline of the real shape.

    python bench/speed/diarization_overlap.py --asr-model DIR/whisper-base [--audio FILE] [--out bench-results/diarization-overlap]

No real pyannote weights are reachable here, so this builds the test suite's pyannote pipeline
(tests/tiny_models.py: full-size WeSpeakerResNet34 embeddings, random weights): realistic compute,
meaningless labels. Prints ASR (word timestamps) alone, diarization alone, both sequentially and
both in two threads (one run each after a warm-up).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from bench.results import Table


def seconds(call) -> float:
    call()
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", required=True)
    parser.add_argument("--audio", type=Path, default=ROOT.parent / "shared" / "dev-audio" / "conv01_standup_2spk.wav")
    parser.add_argument("--out", type=Path, default=Path("bench-results/diarization-overlap"))
    arguments = parser.parse_args()

    import tiny_models
    import torch

    from speaker_transcripts.config import InferenceConfig, ModelSettings
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.diarization import diarize
    from speaker_transcripts.pipeline.transcriber import Transcriber

    pyannote_dir = tiny_models.build_pyannote_pipeline(Path(tempfile.mkdtemp(prefix="pyannote-")))
    handler = Transcriber(settings=ModelSettings(asr_model=arguments.asr_model, diarization_model=str(pyannote_dir)))
    samples = as_float32(decode_file(arguments.audio.read_bytes()).samples)
    config = InferenceConfig(language="en", return_timestamps="word", assisted=False)

    def asr() -> None:
        handler.recognizer.transcribe(samples, config, len(samples) / 16000)

    def diarization() -> None:
        diarize(handler.diarization_pipeline, samples, 16000, {})

    def sequential() -> None:
        asr()
        diarization()

    def overlapped() -> None:
        worker = threading.Thread(target=diarization)
        worker.start()
        asr()
        worker.join()

    timings = {name: seconds(call) for name, call in
               (("asr", asr), ("diarization", diarization), ("sequential", sequential), ("overlapped", overlapped))}
    table = Table("diarization-overlap", (("threads", "torch threads", ""), ("asr", "ASR (word) s", ".1f"), ("diarization", "diarization s", ".1f"),
                                          ("sequential", "one after the other s", ".1f"), ("overlapped", "beside each other s", ".1f"),
                                          ("ratio", "beside / after", ".2f")))
    table.add(threads=torch.get_num_threads(), **timings, ratio=timings["overlapped"] / timings["sequential"])
    table.save(arguments.out)


if __name__ == "__main__":
    main()
