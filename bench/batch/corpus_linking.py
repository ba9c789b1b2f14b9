"""Speakers linked across a corpus: does the batch job give one person one label in every file?

    .venv/bin/python bench/batch/corpus_linking.py [--shared ../shared/dev-audio] [--out /tmp/linking] [--asr whisper-tiny.en]

    .venv/bin/python bench/batch/corpus_linking.py --synthetic 10000 2000

How it measures, and what it reports: bench/README.md, ``corpus_linking.py``.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))
UNRELATED = ("conv01_standup_2spk.wav", "conv03_overlap_2spk.wav", "goforward.wav",
             "librivox_sense_and_sensibility_01_austen_64kb-0870.wav")
THRESHOLDS = (0.45, 0.5, 0.55, 0.58, 0.6, 0.62, 0.65, 0.7)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=REPOSITORY.parent / "shared" / "dev-audio")
    parser.add_argument("--out", type=Path, default=Path("/tmp/corpus-linking"))
    parser.add_argument("--asr", default="whisper-tiny.en")
    parser.add_argument("--diarization", default="pyannote-campplus")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--synthetic", type=int, nargs=2, metavar=("FILES", "PEOPLE"), help="the cost at scale (see above)")
    arguments = parser.parse_args(argv)
    if arguments.synthetic:
        return synthetic(*arguments.synthetic)
    if not (arguments.shared / "meetings").is_dir():
        print(f"no AMI excerpts under {arguments.shared / 'meetings'}: pass --shared", file=sys.stderr)
        return 2

    from speaker_transcripts.batch.job import BatchOptions, run_batch
    from speaker_transcripts.batch.linking import LinkingParameters, link_rows
    from speaker_transcripts.config import ModelSettings

    inputs = sorted(str(path) for path in (arguments.shared / "meetings").glob("*.wav"))
    inputs += [str(arguments.shared / name) for name in UNRELATED]
    settings = ModelSettings(asr_model=arguments.asr, diarization_model=arguments.diarization, warmup=False)
    summary = run_batch(inputs, arguments.out, settings, {"language": "en"}, BatchOptions(workers=1))
    rows = summary.rows
    people = _people(rows)

    shipped = score([[segment["corpus_speaker"] for segment in row["segments"]] for row in rows], rows, people)
    print(f"\nshipped ({LinkingParameters().threshold}): {_line(shipped)}")
    figures: dict[str, Any] = {"shipped": shipped, "sweep": {}, "items": sum(map(len, people))}
    for threshold in THRESHOLDS:
        relinked = copy.deepcopy(rows)
        link_rows(relinked, LinkingParameters(threshold=threshold))
        result = score([[segment["corpus_speaker"] for segment in row["segments"]] for row in relinked], rows, people)
        figures["sweep"][threshold] = result
        print(f"  threshold {threshold:.2f}: {_line(result)}")
    figures["similarities"] = similarities(rows, people)
    for kind, values in figures["similarities"].items():
        print(f"{kind}: " + ", ".join(f"{value:.3f}" for value in values[:12]))
    if arguments.json:
        arguments.json.write_text(json.dumps(figures, indent=1, ensure_ascii=False))
    return 0


def _people(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """For each row, each of its voices' person: the reference speaker its segments overlap most."""
    from speaker_transcripts.evaluation.scoring import read_rttm

    found = []
    for row in rows:
        path = Path(row["path"])
        reference = read_rttm(path.with_suffix(".rttm")) if path.with_suffix(".rttm").exists() else []
        mine: dict[str, str] = {}
        for voice in row["speaker_embeddings"] or []:
            overlap: dict[str, float] = {}
            for segment in (s for s in row["segments"] if s["speaker"] == voice["speaker"]):
                for turn in reference:
                    shared = min(segment["end"], turn.end) - max(segment["start"], turn.start)
                    if shared > 0:
                        overlap[turn.speaker] = overlap.get(turn.speaker, 0.0) + shared
            person = max(overlap, key=overlap.__getitem__) if overlap else voice["speaker"]
            # AMI participant ids name the same person across excerpts; other files' labels (A, B) are theirs alone
            mine[voice["speaker"]] = person if path.parent.name == "meetings" else f"{path.stem}:{person}"
        found.append(mine)
    return found


def score(labels_per_row: list[list[str | None]], rows: list[dict[str, Any]], people: list[dict[str, str]]) -> dict[str, Any]:
    """Pairwise precision, recall and F1 over pairs of items (file speakers) in different files."""
    items = []
    for position, (row, labels) in enumerate(zip(rows, labels_per_row)):
        corpus = {segment["speaker"]: label for segment, label in zip(row["segments"], labels)}
        items += [(position, people[position][speaker], corpus.get(speaker)) for speaker in people[position]]
    true_positive = false_positive = false_negative = 0
    merged = []
    for (file_a, person_a, label_a), (file_b, person_b, label_b) in itertools.combinations(items, 2):
        if file_a == file_b:
            continue
        linked = label_a is not None and label_a == label_b
        same = person_a == person_b
        true_positive += linked and same
        false_positive += linked and not same
        false_negative += same and not linked
        if linked and not same:
            merged.append(f"{Path(rows[file_a]['path']).stem}:{person_a} + {Path(rows[file_b]['path']).stem}:{person_b}")
    precision = true_positive / (true_positive + false_positive) if true_positive + false_positive else 1.0
    recall = true_positive / (true_positive + false_negative) if true_positive + false_negative else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 3), "recall": round(recall, 3), "f1": round(f1, 3),
            "same_person_pairs": true_positive + false_negative, "different_people_linked": merged,
            "people": len({label for labels in labels_per_row for label in labels if label})}


def similarities(rows: list[dict[str, Any]], people: list[dict[str, str]]) -> dict[str, list[float]]:
    """Cosine similarity of every cross-file pair of voices, same person and different people, highest first."""
    voices = [(position, people[position][voice["speaker"]], np.asarray(voice["embedding"]) / np.linalg.norm(voice["embedding"]))
              for position, row in enumerate(rows) for voice in row["speaker_embeddings"] or []]
    same, different = [], []
    for (file_a, person_a, a), (file_b, person_b, b) in itertools.combinations(voices, 2):
        if file_a != file_b:
            (same if person_a == person_b else different).append(round(float(a @ b), 3))
    return {"same person": sorted(same, reverse=True), "different people": sorted(different, reverse=True)}


def synthetic(files: int, population: int, dimension: int = 192, seed: int = 0) -> int:
    """Link a synthetic corpus and say what it cost."""
    import resource
    import time

    from speaker_transcripts.batch.linking import FileSpeaker, link_speakers

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((population, dimension))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    truth, items = [], []
    for file in range(files):
        for slot, person in enumerate(rng.choice(population, size=3, replace=False)):
            noise = rng.standard_normal(dimension)
            noise -= (noise @ centres[person]) * centres[person]
            items.append(FileSpeaker(file, f"SPEAKER_{slot:02d}", 0.8 * centres[person] + 0.6 * noise / np.linalg.norm(noise), 10.0))
            truth.append(int(person))
    started = time.perf_counter()
    labels = link_speakers(items)
    elapsed = time.perf_counter() - started
    first: dict[int, str] = {}
    right = sum(first.setdefault(person, label) == label for person, label in zip(truth, labels)) / len(truth)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{files} files, {len(items)} file speakers, {len(first)} people in the corpus: {elapsed:.1f} s, "
          f"{len(set(labels))} people found, {right:.1%} grouped right, peak memory {peak:.0f} MB")
    return 0


def _line(result: dict[str, Any]) -> str:
    merged = result["different_people_linked"]
    return (f"precision {result['precision']:.2f} recall {result['recall']:.2f} F1 {result['f1']:.2f} "
            f"({result['same_person_pairs']} same-person pairs, {result['people']} people); different people linked: "
            f"{', '.join(merged) if merged else 'none'}")


if __name__ == "__main__":
    sys.exit(main())
