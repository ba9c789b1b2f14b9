"""Derive a distil-style assistant from a Whisper checkpoint: the full encoder, a few decoder layers.

    python bench/speed/derive_assistant.py --main DIR/whisper-base --out DIR/whisper-base-draft2 [--layers 0 5]

distil-whisper initialises its student this way (all encoder layers, maximally spaced decoder
layers) and then trains it; this one is not trained, so it drafts worse than a real
distil-whisper would. It shares the main model's tokenizer, which speculative decoding needs,
and lets the benchmarks measure assisted decoding on CPU without the Hub.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import AutoProcessor, WhisperForConditionalGeneration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--main", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, nargs="+", help="decoder layers to keep (default: first and last)")
    arguments = parser.parse_args()

    model = WhisperForConditionalGeneration.from_pretrained(arguments.main)
    decoder_layers = model.model.decoder.layers
    keep = arguments.layers or [0, len(decoder_layers) - 1]
    model.model.decoder.layers = torch.nn.ModuleList([decoder_layers[index] for index in keep])
    model.config.decoder_layers = len(keep)
    for position, layer in enumerate(model.model.decoder.layers):
        layer.self_attn.layer_idx = position
        layer.encoder_attn.layer_idx = position
    model.generation_config.alignment_heads = [[0, 0]]
    model.save_pretrained(arguments.out)
    AutoProcessor.from_pretrained(arguments.main).save_pretrained(arguments.out)
    print(f"kept decoder layers {keep} of {len(decoder_layers)}: {arguments.out}")


if __name__ == "__main__":
    main()
