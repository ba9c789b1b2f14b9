"""How often the speaker count is right, and whether the count warnings fall on the wrong counts.

    .venv/bin/python bench/quick_conversations.py --out /tmp/quick
    .venv/bin/python bench/speaker_count.py --manifest ../shared/dev-audio/manifest.json /tmp/quick/manifest.json

Runs the product's diarization (``pipeline.diarization.diarize`` on the embedded pipeline, no
hints) on every manifest entry with an RTTM, counts the speakers of the first 30 s against the
reference, as the transcript shows them (the exclusive turns words are attributed from; a voice
heard only in overlap gets no words, so ``bench/tune_diarization.py``, which counts the timeline,
can count one more), and asks ``pipeline.speaker_count.count_doubts``
about each: a good warning falls on the wrong counts and spares the right ones. Prints one line per
file, then per group (dev conversations, AMI meetings, quick conversations): counts right, wrong
counts warned about, right counts warned about.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SCORED_SECONDS = 30.0
GROUPS = {"synthetic_conversation": "dev conversations", "quick_conversation": "quick conversations"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, nargs="+", required=True)
    parser.add_argument("--model", default="pyannote-campplus", help="embedded name or pipeline folder")
    arguments = parser.parse_args(argv)

    import torch
    from pyannote.audio import Pipeline

    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.models import registry as models
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_file
    from speaker_transcripts.pipeline.diarization import diarize
    from speaker_transcripts.pipeline.speaker_count import count_doubts

    torch.set_num_threads(1)
    pipeline = Pipeline.from_pretrained(models.local_path(arguments.model))
    entries = [entry for manifest in arguments.manifest for entry in load_manifest(manifest) if entry.turns and entry.audio.suffix == ".wav"]
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for entry in [entry for entry in entries if not entry.name.startswith("short_")]:
        samples = decode_file(entry.audio.read_bytes(), 3600).samples
        found = diarize(pipeline, samples, SAMPLING_RATE, {})
        counted = len({turn.speaker for turn in found.turns if turn.start < SCORED_SECONDS})  # voices given words
        reference = len({turn.speaker for turn in entry.turns if turn.start < SCORED_SECONDS})
        doubts = count_doubts(found.turns, found.embeddings)
        group = totals[GROUPS.get(entry.kind, "AMI meetings")]
        group["files"] += 1
        group["right"] += counted == reference
        group["wrong warned"] += counted != reference and bool(doubts)
        group["right warned"] += counted == reference and bool(doubts)
        verdict = "right" if counted == reference else "WRONG"
        print(f"{entry.name:26s} {counted}/{reference} {verdict:5s} {doubts[0] if doubts else ''}", flush=True)
    for name, group in totals.items():
        wrong = group["files"] - group["right"]
        print(f"{name}: count right {group['right']}/{group['files']}; warned on {group['wrong warned']}/{wrong} wrong "
              f"and {group['right warned']}/{group['right']} right counts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
