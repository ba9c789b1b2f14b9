"""Milliseconds a Whisper decoder step takes with the decoding loop on one CPU thread and on every thread, by rows.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/decoder_threads.py [--asr-model whisper-base] \
        [--rows 1 2 4 8 12 16 24] [--steps 40] [--repeats 2]

The measurement behind ``SpeechRecognizer.loop_threads`` (one on the CPU): the model loaded as the product
loads it (the CPU fast path), each batch of ``rows`` random 30-s inputs encoded once, then ``--steps`` tokens
generated (forced, so every setting decodes as many) with the loop on one thread and on all; the large
products (``asr._large_products``: the cross-attention and the vocabulary projection here) run on every
thread either way, as shipped. The best of ``--repeats`` runs per setting, the two settings alternating.
Run it under the passive wait policy the package sets (its import sets it, unless the variable is already set).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16, 24])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    arguments = parser.parse_args(argv)

    import torch
    from transformers.utils import logging as transformers_logging

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models import registry
    from speaker_transcripts.pipeline.asr import SpeechRecognizer
    from speaker_transcripts.pipeline.cpu_threads import torch_threads

    recognizer = SpeechRecognizer(registry.prepare(ModelSettings(asr_model=arguments.asr_model, diarization_model=None)))
    if recognizer.device != "cpu":
        print("this benchmark is about CPU threads; the model loaded on", recognizer.device, file=sys.stderr)
        return 2
    transformers_logging.set_verbosity_error()  # forced lengths make generate say so at every call
    model, generator = recognizer.model, torch.Generator().manual_seed(0)
    options = {"max_new_tokens": arguments.steps, "min_new_tokens": arguments.steps, "num_beams": 1, "do_sample": False}
    if recognizer.capabilities.multilingual:
        options.update(language="en", task="transcribe")
    settings = {"one thread": 1, "every thread": recognizer.threads}
    print(f"{recognizer.threads} threads; ms a decoder step, best of {arguments.repeats}\n\n| rows | loop on one thread | on every thread |\n|---|---|---|")
    with torch.inference_mode():
        for rows in arguments.rows:
            features = torch.randn(rows, model.config.num_mel_bins, 3000, generator=generator)
            encoded = model.get_encoder()(features)
            best = dict.fromkeys(settings, float("inf"))
            for _ in range(arguments.repeats):
                for name, threads in settings.items():
                    with torch_threads(threads):
                        started = time.perf_counter()
                        model.generate(encoder_outputs=encoded, **options)
                        best[name] = min(best[name], (time.perf_counter() - started) / arguments.steps * 1000)
            print(f"| {rows} | {best['one thread']:.1f} | {best['every thread']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
