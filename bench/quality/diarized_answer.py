"""What a diarized answer scores: its speaker timeline, its speaker segments, and the words spoken over someone.

    .venv/bin/python bench/quality/diarized_answer.py [--manifest ../shared/dev-audio/manifest.json] [--asr-model whisper-base] [--diarization-model pyannote-campplus] [--out bench-results/diarized-answer]

How it measures, and what it reports: bench/README.md, ``diarized_answer.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))
from bench.results import Table

GROUPS = ("alone", "overlapping", "mostly inside another's")
EDGES = ("first word of a turn", "last word of a turn")  # where diarization boundaries err (issue: turn-end words)
KINDS = ("real meetings", "synthetic conversations")
SCORED_SECONDS = 30.0  # as bench/quality/tune_diarization.py scores (the meeting references cover the first 30 s)


def turn_groups(turns: list[dict]) -> list[str]:
    """The group of each reference turn (``GROUPS``)."""
    groups = []
    for turn in turns:
        shared = [
            max(0.0, min(turn["end"], other["end"]) - max(turn["start"], other["start"]))
            for other in turns
            if other["speaker"] != turn["speaker"]
        ]
        longest = max(shared, default=0.0)
        if longest <= 0:
            groups.append(GROUPS[0])
        elif longest > (turn["end"] - turn["start"]) / 2:
            groups.append(GROUPS[2])
        else:
            groups.append(GROUPS[1])
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=REPOSITORY.parent / "shared" / "dev-audio" / "manifest.json")
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--diarization-model", default="pyannote-campplus")
    parser.add_argument("--out", type=Path, default=Path("bench-results/diarized-answer"))
    arguments = parser.parse_args(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: pass --manifest (the dev conversations with timed turns)")
        return 2

    from speaker_transcripts import ModelSettings, Transcriber
    from speaker_transcripts.evaluation.scoring import DiarizationTotals, english_normaliser, load_manifest
    from speaker_transcripts.pipeline.diarization import Turn

    normalise = english_normaliser()
    transcriber = Transcriber(ModelSettings(asr_model=arguments.asr_model, diarization_model=arguments.diarization_model))
    timed_turns = {
        Path(item["audio"]).name: json.loads((arguments.manifest.parent / item["transcript"]).read_text())
        for item in json.loads(arguments.manifest.read_text())
        if item.get("transcript_format") == "turns_json"
    }
    der = {(kind, output): DiarizationTotals() for kind in KINDS for output in ("timeline", "segments")}
    words = {group: [0, 0, 0] for group in (*GROUPS, *EDGES)}  # words, recognised, attributed right
    files = Table("diarized-answer-files", (("file", "file", ""), ("timeline", "DER timeline", ".1%"), ("segments", "DER segments", ".1%")))
    for entry in load_manifest(arguments.manifest):
        if not entry.turns or entry.name.startswith("short_") or entry.audio.suffix != ".wav":
            continue
        result = transcriber({"inputs": entry.audio.read_bytes(), "parameters": {}})
        kind = KINDS[1] if entry.name.startswith("conv") else KINDS[0]
        timeline = [Turn(turn["speaker"], turn["start"], turn["end"]) for turn in result["diarization"]]
        segments = [Turn(segment["speaker"], *segment["timestamp"]) for segment in result["speakers"]]
        scores = {
            output: der[kind, output].add(entry.turns, hypothesis, SCORED_SECONDS)["der"]
            for output, hypothesis in (("timeline", timeline), ("segments", segments))
        }
        files.add(file=entry.name, timeline=scores["timeline"], segments=scores["segments"])
        if entry.name in timed_turns:
            _score_overlap(sorted(timed_turns[entry.name], key=lambda turn: turn["start"]), result, words, normalise)
    files.save(arguments.out)
    totals = Table("diarized-answer-der", (("kind", "recordings", ""), ("output", "output", ""), ("der", "DER, collar 0", ".1%"),
                                           ("der_collar", "DER, collar ±0.25 s", ".1%")))
    for (kind, output), scored in der.items():
        summary = scored.summary()
        totals.add(kind=kind, output=output, der=summary["der"], der_collar=summary["der_collar_0.25"])
    totals.save(arguments.out)
    attributed = Table("diarized-answer-words", (("group", "words (dev conversations)", ""), ("words", "words", ""), ("seen", "recognised", ""),
                                                 ("right", "attributed right", ""), ("share", "of the words", ".1%"), ("of_seen", "of those recognised", ".1%")))
    for group, (count, seen, right) in words.items():
        attributed.add(group=group, words=count, seen=seen, right=right, share=right / count if count else None, of_seen=right / seen if seen else None)
    attributed.save(arguments.out)
    return 0


def _score_overlap(turns: list[dict], result: dict, totals: dict[str, list[int]], normalise: Any) -> None:
    """Add one file's words, recognised words and rightly attributed words to ``totals`` by turn group."""
    from speaker_transcripts.evaluation.scoring import attribution, words_of

    reference, word_groups, edges = [], [], {edge: [] for edge in EDGES}
    for turn, group in zip(turns, turn_groups(turns), strict=True):
        spoken = words_of(turn["text"], normalise)
        if spoken:
            edges[EDGES[0]].append(len(reference))
            edges[EDGES[1]].append(len(reference) + len(spoken) - 1)
        for word in spoken:
            reference.append((word, turn["speaker"]))
            word_groups.append(group)
    hypothesis = [(word, segment["speaker"]) for segment in result["speakers"] for word in words_of(segment["text"], normalise)]
    scored = attribution(reference, hypothesis)
    recognised = set(_recognised(reference, hypothesis))
    chosen = {group: [index for index, word_group in enumerate(word_groups) if word_group == group] for group in GROUPS}
    for group, indices in {**chosen, **edges}.items():
        counts = (len(indices), sum(index in recognised for index in indices), sum(scored.right[index] for index in indices))
        totals[group] = [total + count for total, count in zip(totals[group], counts, strict=True)]


def _recognised(reference: list[tuple[str, str]], hypothesis: list[tuple[str, str]]) -> list[int]:
    """Reference word indices that ASR recognised (aligned to a hypothesis word, equal or
    substituted): with one speaker on each side, attribution is right exactly where words align."""
    from speaker_transcripts.evaluation.scoring import attribution

    aligned = attribution([(word, "R") for word, _ in reference], [(word, "H") for word, _ in hypothesis])
    return [index for index, right in enumerate(aligned.right) if right]


if __name__ == "__main__":
    sys.exit(main())
