"""Turn-end words on real meetings: does the last word of a turn stay with its speaker?

    .venv/bin/python bench/quality/turn_ends.py --manifest ../shared/dev-audio/manifest.json [/tmp/quick/manifest.json] [--asr-model whisper-base] [--out bench-results/turn-ends]

The dev conversations have 26 turn ends; the AMI excerpts (and the quick conversations of
``bench/quality/quick_conversations.py``) have many more but no word-level reference. So each recognised
word is given the reference speaker talking alone at its middle (RTTM; words in overlap or silence
are left out), hypothesis labels are mapped one-to-one to reference speakers by shared time, and a
*turn-end word* is the last scored word before the reference speaker changes. Runs the product's
default request (diarization, word-level attribution) twice: as shipped (a sentence's last words
keep their speaker unless the change has ``TURN_END_SWITCH_S`` of evidence) and with that rule off
(``MID_SENTENCE_SWITCH_S`` everywhere, the code before the rule). Prints, per group, turn-end words
on their speaker and all scored words on their speaker, both ways.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))
from bench.results import Table

SCORED_SECONDS = 30.0  # the meeting references cover the first 30 s
GROUPS = {"synthetic_conversation": "dev conversations", "quick_conversation": "quick conversations", "one_voice": "one voice"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, nargs="+", required=True)
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--diarization-model", default="pyannote-campplus")
    parser.add_argument("--switch", type=float, nargs="+", help="TURN_END_SWITCH_S values to compare (default: shipped, and the rule off)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/turn-ends"))
    arguments = parser.parse_args(argv)

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.pipeline import diarization
    from speaker_transcripts.pipeline.transcriber import Transcriber

    handler = Transcriber(ModelSettings(asr_model=arguments.asr_model, diarization_model=arguments.diarization_model, warmup=False))
    entries = [entry for manifest in arguments.manifest for entry in load_manifest(manifest)
               if entry.turns and entry.audio.suffix == ".wav" and not entry.name.startswith("short_")]
    shipped = diarization.TURN_END_SWITCH_S
    totals: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    files = Table("turn-ends-files", (("file", "file", ""), ("way", "way", ""), ("ends", "turn ends right", ""), ("words", "words right", "")))
    for entry in entries:
        audio = entry.audio.read_bytes()
        group = GROUPS.get(entry.kind, "AMI meetings")
        ways = [(f"{value:g} s", value) for value in arguments.switch] if arguments.switch else [
            ("shipped", shipped), ("rule off", diarization.MID_SENTENCE_SWITCH_S)]
        for way, switch in ways:
            diarization.TURN_END_SWITCH_S = switch
            try:
                answer = handler({"inputs": audio, "parameters": {"return_timestamps": "word", "language": "en"}})
            finally:
                diarization.TURN_END_SWITCH_S = shipped
            counts = score(answer["chunks"], entry.turns)
            for name, value in counts.items():
                totals[group, way][name] += value
            files.add(file=entry.name, way=way, ends=f"{counts['ends right']}/{counts['ends']}", words=f"{counts['words right']}/{counts['words']}")
    files.save(arguments.out)
    groups = Table("turn-ends", (("group", "group", ""), ("way", "way", ""), ("ends", "turn-end words on their speaker", ""),
                                 ("ends_share", "share", ".1%"), ("words", "all scored words", ""), ("words_share", "share", ".1%")))
    for (group, way), counts in sorted(totals.items()):
        groups.add(group=group, way=way, ends=f"{counts['ends right']} of {counts['ends']}", ends_share=counts["ends right"] / max(counts["ends"], 1),
                   words=f"{counts['words right']} of {counts['words']}", words_share=counts["words right"] / max(counts["words"], 1))
    groups.save(arguments.out)
    return 0


def score(words: list[dict[str, Any]], turns: list[Any]) -> dict[str, int]:
    """Scored words (one reference speaker alone at the word's middle, first 30 s) and turn-end words
    (the last scored word before the reference speaker changes), and how many are on their speaker;
    the wrong turn ends by kind: the turn's last word alone on another speaker (a boundary a little
    early: what the turn-end rule is for), inside a run of the turn's words all on another speaker,
    a one-word turn."""
    scored = []
    for word in words:
        start, end = word["timestamp"]
        middle = (start + (end if end is not None else start)) / 2
        talking = {turn.speaker for turn in turns if turn.start <= middle < turn.end}
        if middle < SCORED_SECONDS and len(talking) == 1 and word.get("speaker"):
            scored.append((word["speaker"], talking.pop(), max((end or start) - start, 0.0)))
    mapping = _mapping(scored)
    ends = [index for index in range(len(scored) - 1) if scored[index][1] != scored[index + 1][1]]
    right = [mapping.get(hyp) == ref for hyp, ref, _ in scored]
    kinds = {"end wrong: last word alone": 0, "end wrong: inside a wrong run": 0, "end wrong: one-word turn": 0}
    for index in (index for index in ends if not right[index]):
        if index == 0 or scored[index - 1][1] != scored[index][1]:
            kinds["end wrong: one-word turn"] += 1
        else:
            kinds["end wrong: last word alone" if right[index - 1] else "end wrong: inside a wrong run"] += 1
    return {"words": len(scored), "words right": sum(right), "ends": len(ends), "ends right": sum(right[index] for index in ends), **kinds}


def _mapping(scored: list[tuple[str, str, float]]) -> dict[str, str]:
    """Hypothesis label -> reference speaker, one-to-one, maximising the words' shared time."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    hypotheses = sorted({hyp for hyp, _, _ in scored})
    references = sorted({ref for _, ref, _ in scored})
    shared = np.zeros((len(hypotheses), len(references)))
    for hyp, ref, seconds in scored:
        shared[hypotheses.index(hyp), references.index(ref)] += seconds + 1e-3
    rows, columns = linear_sum_assignment(shared, maximize=True)
    return {hypotheses[row]: references[column] for row, column in zip(rows, columns)}


if __name__ == "__main__":
    sys.exit(main())
