"""Who spoke, as the answer tells it: the speaker count, its warnings, turn-end words and DER, with
and without the transcript's phrase check (``pipeline/phrase_speakers.py``).

    .venv/bin/python bench/quality/quick_conversations.py --out /tmp/quick
    .venv/bin/python bench/quality/speaker_count.py --manifest ../shared/dev-audio/manifest.json /tmp/quick/manifest.json

How it measures, and what it reports: bench/README.md, ``speaker_count.py``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(REPOSITORY / "bench" / "quality"))  # turn_ends.py

SCORED_SECONDS = 30.0
GROUPS = {"synthetic_conversation": "dev conversations", "quick_conversation": "quick conversations", "one_voice": "one voice",
          "real_speech": "one voice", "synthetic_short": "one voice"}
UNANNOTATED_SOLO = ("real_speech", "synthetic_short")  # one reader, no RTTM: dictation, a read sentence, a 2-s clip
WAYS = ("shipped", "no phrase check")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, nargs="+", required=True)
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--models", nargs="+", default=["pyannote-campplus"],
                        help="embedded names or pipeline folders, each run on every file in turn (side by side)")
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    arguments = parser.parse_args(argv)

    from turn_ends import score

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import DiarizationTotals, load_manifest
    from speaker_transcripts.pipeline import transcriber
    from speaker_transcripts.pipeline.diarization import Turn
    from speaker_transcripts.pipeline.phrase_speakers import Checked
    from speaker_transcripts.pipeline.speaker_count import COUNT_ADVICE
    from speaker_transcripts.pipeline.transcriber import Transcriber

    closest: list[float | None] = []  # the nearest two voices' centroid distance, of the last answer's speakers
    spreads: list[float | None] = []  # the phrase check's spread of a one-voice answer (None: too few phrases)
    speaker_count_warnings = transcriber._speaker_count_warnings

    def count_warnings(config: Any, found: Any, spread: float | None = None) -> list[str]:
        if found is not None:
            closest.append(closest_distance({turn.speaker for turn in found.turns}, found.embeddings))
        spreads.append(spread)
        return speaker_count_warnings(config, found, spread)

    transcriber._speaker_count_warnings = count_warnings
    nearest: dict[tuple[str, str, bool], list[float]] = defaultdict(list)  # (group, way, count right) -> distances

    handlers = {model: Transcriber(ModelSettings(asr_model=arguments.asr_model, diarization_model=model, warmup=False))
                for model in arguments.models}
    checked = Transcriber._checked_by_phrases
    entries = [entry for manifest in arguments.manifest for entry in load_manifest(manifest)
               if (entry.turns or entry.kind in UNANNOTATED_SOLO) and entry.kind != "format_variant"]
    totals: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ders: dict[tuple[str, str], DiarizationTotals] = defaultdict(DiarizationTotals)
    for entry in entries:
        audio = entry.audio.read_bytes()
        group = GROUPS.get(entry.kind, "AMI meetings")
        reference = len({turn.speaker for turn in entry.turns if turn.start < SCORED_SECONDS}) or 1
        for model, phrase_check in ((model, way) for model in arguments.models for way in arguments.ways):
            handler = handlers[model]
            way = phrase_check if len(arguments.models) == 1 else f"{Path(model).name} {phrase_check}"
            if phrase_check == "no phrase check":
                Transcriber._checked_by_phrases = lambda _self, found, *_: Checked(found)
            closest.clear()
            spreads.clear()
            started = time.perf_counter()
            try:
                answer = handler({"inputs": audio, "parameters": {"return_timestamps": "word", "language": "en"}})
            finally:
                Transcriber._checked_by_phrases = checked
            seconds = time.perf_counter() - started
            counted = len({chunk["speaker"] for chunk in answer["chunks"] if chunk["timestamp"][0] < SCORED_SECONDS and chunk.get("speaker")})
            warned = any(COUNT_ADVICE in warning for warning in answer["warnings"])
            timeline = [Turn(turn["speaker"], turn["start"], turn["end"]) for turn in answer["diarization"]]
            der = ders[group, way].add(entry.turns, timeline, SCORED_SECONDS)["der"] if entry.turns else float("nan")
            counts = score(answer["chunks"], entry.turns)
            total = totals[group, way]
            for name, value in counts.items():
                total[name] += value
            total["files"] += 1
            total["right"] += counted == reference
            total["wrong warned"] += counted != reference and warned
            total["right warned"] += counted == reference and warned
            total["centiseconds"] += round(seconds * 100)
            verdict = "right" if counted == reference else "WRONG"
            distance = closest[-1] if closest else None
            if distance is not None:
                nearest[group, way, counted == reference].append(distance)
            print(f"{entry.name:26s} {way:15s} speakers {counted}/{reference} {verdict:5s} {'warned' if warned else '':6s} "
                  f"turn ends {counts['ends right']}/{counts['ends']} words {counts['words right']}/{counts['words']} "
                  f"DER {der:.3f} closest voices {'-' if distance is None else f'{distance:.2f}'} "
                  f"one-voice spread {'-' if not spreads or spreads[-1] is None else f'{spreads[-1]:.2f}'} {seconds:.1f} s", flush=True)
    print(f"\n{'group':20s} {'way':15s} {'count right':>11s} {'wrong warned':>12s} {'right warned':>12s} {'turn ends right':>16s} "
          f"{'words right':>12s} {'DER':>6s} {'seconds':>7s}")
    for (group, way), total in sorted(totals.items()):
        wrong = total["files"] - total["right"]
        print(f"{group:20s} {way:15s} {total['right']:>5d} of {total['files']:<3d} {total['wrong warned']:>6d} of {wrong:<3d} "
              f"{total['right warned']:>6d} of {total['right']:<3d} {total['ends right']:>8d} of {total['ends']:<4d} "
              f"{total['words right']:>5d} of {total['words']:<4d} {ders[group, way].summary()['der']:6.1%} {total['centiseconds'] / 100:7.1f}")
        print(f"{'':36s} wrong turn ends: " + ", ".join(f"{name[11:]} {total[name]}" for name in total if name.startswith("end wrong")))
        for right in (True, False):
            distances = " ".join(f"{distance:.2f}" for distance in sorted(nearest[group, way, right]))
            print(f"{'':36s} closest voices where the count is {'right' if right else 'wrong'}: {distances or '-'}")
    return 0


def closest_distance(speakers: set[str], centroids: dict[str, np.ndarray]) -> float | None:
    """The cosine distance between the two nearest of ``speakers``' centroids (zero ones, pyannote's
    padding for a voice it could not embed, left out), or None with fewer than two."""
    vectors = [centroids[speaker] for speaker in sorted(speakers) if speaker in centroids and np.any(centroids[speaker])]
    distances = [1.0 - float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b)) for a, b in itertools.combinations(vectors, 2)]
    return min(distances, default=None)


if __name__ == "__main__":
    sys.exit(main())
