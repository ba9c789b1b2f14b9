"""Who spoke, as the answer tells it: the speaker count, its warnings, turn-end words and DER, with
and without the transcript's phrase check (``pipeline/phrase_speakers.py``).

    .venv/bin/python bench/quality/quick_conversations.py --out /tmp/quick
    .venv/bin/python bench/quality/speaker_count.py --manifest ../shared/dev-audio/manifest.json /tmp/quick/manifest.json [--out bench-results/speaker-count]

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
from bench.results import Table

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
    parser.add_argument("--out", type=Path, default=Path("bench-results/speaker-count"))
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
    files = Table("speaker-count-files", (("file", "file", ""), ("way", "way", ""), ("speakers", "speakers found/reference", ""),
                                          ("right", "right", ""), ("warned", "warned", ""), ("turn_ends", "turn ends right", ""),
                                          ("words", "words right", ""), ("der", "DER", ".3f"), ("closest", "closest voices", ".2f"),
                                          ("spread", "one-voice spread", ".2f"), ("seconds", "s", ".1f")))
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
            der = ders[group, way].add(entry.turns, timeline, SCORED_SECONDS)["der"] if entry.turns else None
            counts = score(answer["chunks"], entry.turns)
            total = totals[group, way]
            for name, value in counts.items():
                total[name] += value
            total["files"] += 1
            total["right"] += counted == reference
            total["wrong warned"] += counted != reference and warned
            total["right warned"] += counted == reference and warned
            total["centiseconds"] += round(seconds * 100)
            distance = closest[-1] if closest else None
            if distance is not None:
                nearest[group, way, counted == reference].append(distance)
            files.add(file=entry.name, way=way, speakers=f"{counted}/{reference}", right=counted == reference, warned=warned,
                      turn_ends=f"{counts['ends right']}/{counts['ends']}", words=f"{counts['words right']}/{counts['words']}",
                      der=der, closest=distance, spread=spreads[-1] if spreads else None, seconds=seconds)
    files.save(arguments.out)
    groups = Table("speaker-count", (("group", "group", ""), ("way", "way", ""), ("count_right", "count right", ""),
                                     ("wrong_warned", "wrong counts warned", ""), ("right_warned", "right counts warned", ""),
                                     ("turn_ends_right", "turn ends right", ""), ("words_right", "words right", ""), ("der", "DER", ".1%"),
                                     ("seconds", "s", ".1f"), ("wrong_turn_ends", "wrong turn ends by kind", ""),
                                     ("closest_right", "closest voices, count right", ""), ("closest_wrong", "closest voices, count wrong", "")))
    for (group, way), total in sorted(totals.items()):
        wrong = total["files"] - total["right"]
        groups.add(group=group, way=way, count_right=f"{total['right']} of {total['files']}", wrong_warned=f"{total['wrong warned']} of {wrong}",
                   right_warned=f"{total['right warned']} of {total['right']}", turn_ends_right=f"{total['ends right']} of {total['ends']}",
                   words_right=f"{total['words right']} of {total['words']}", der=ders[group, way].summary()["der"],
                   seconds=total["centiseconds"] / 100,
                   wrong_turn_ends=", ".join(f"{name[11:]} {total[name]}" for name in total if name.startswith("end wrong")),
                   **{f"closest_{'right' if right else 'wrong'}": " ".join(f"{distance:.2f}" for distance in sorted(nearest[group, way, right])) or None
                      for right in (True, False)})
    groups.save(arguments.out)
    return 0


def closest_distance(speakers: set[str], centroids: dict[str, np.ndarray]) -> float | None:
    """The cosine distance between the two nearest of ``speakers``' centroids (zero ones, pyannote's
    padding for a voice it could not embed, left out), or None with fewer than two."""
    vectors = [centroids[speaker] for speaker in sorted(speakers) if speaker in centroids and np.any(centroids[speaker])]
    distances = [1.0 - float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b)) for a, b in itertools.combinations(vectors, 2)]
    return min(distances, default=None)


if __name__ == "__main__":
    sys.exit(main())
