"""Who spoke, as the answer tells it: the speaker count, its warnings, turn-end words and DER, with
and without the transcript's phrase check (``pipeline/phrase_speakers.py``).

    .venv/bin/python bench/quick_conversations.py --out /tmp/quick
    .venv/bin/python bench/speaker_count.py --manifest ../shared/dev-audio/manifest.json /tmp/quick/manifest.json

Runs the product's default request (whisper-base, the embedded diarization, word-level
attribution, no speaker hints) on every manifest entry with an RTTM, twice: as shipped and with the
phrase check off (the pipeline before it). Over the first 30 s (the meeting references cover
them) it counts the voices the transcript shows (those given words) against the reference, asks
whether the answer warned about the count (a good warning falls on the wrong counts and spares the
right ones), scores turn-end words and all words as ``bench/turn_ends.py`` does (and sorts the wrong
turn ends by kind: a last word alone on the next speaker, or a whole turn on the wrong one), and scores the
answer's ``diarization`` timeline (DER, collar 0). One-voice recordings (``solo`` of
``quick_conversations.py``) are where a check that splits speakers must not. Prints one line per
file and way, then per group.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(REPOSITORY / "bench"))

SCORED_SECONDS = 30.0
GROUPS = {"synthetic_conversation": "dev conversations", "quick_conversation": "quick conversations", "one_voice": "one voice"}
WAYS = ("shipped", "no phrase check")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, nargs="+", required=True)
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--model", default="pyannote-campplus", help="embedded name or pipeline folder")
    arguments = parser.parse_args(argv)

    from turn_ends import score

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import DiarizationTotals, load_manifest
    from speaker_transcripts.pipeline.diarization import Turn
    from speaker_transcripts.pipeline.phrase_speakers import Checked
    from speaker_transcripts.pipeline.speaker_count import COUNT_ADVICE
    from speaker_transcripts.pipeline.transcriber import Transcriber

    handler = Transcriber(ModelSettings(asr_model=arguments.asr_model, diarization_model=arguments.model, warmup=False))
    checked = Transcriber._checked_by_phrases
    entries = [entry for manifest in arguments.manifest for entry in load_manifest(manifest)
               if entry.turns and entry.audio.suffix == ".wav" and not entry.name.startswith("short_")]
    totals: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ders: dict[tuple[str, str], DiarizationTotals] = defaultdict(DiarizationTotals)
    for entry in entries:
        audio = entry.audio.read_bytes()
        group = GROUPS.get(entry.kind, "AMI meetings")
        reference = len({turn.speaker for turn in entry.turns if turn.start < SCORED_SECONDS})
        for way in WAYS:
            if way == "no phrase check":
                Transcriber._checked_by_phrases = lambda _self, found, *_: Checked(found)
            started = time.perf_counter()
            try:
                answer = handler({"inputs": audio, "parameters": {"return_timestamps": "word", "language": "en"}})
            finally:
                Transcriber._checked_by_phrases = checked
            seconds = time.perf_counter() - started
            counted = len({chunk["speaker"] for chunk in answer["chunks"] if chunk["timestamp"][0] < SCORED_SECONDS and chunk.get("speaker")})
            warned = any(COUNT_ADVICE in warning for warning in answer["warnings"])
            timeline = [Turn(turn["speaker"], turn["start"], turn["end"]) for turn in answer["diarization"]]
            der = ders[group, way].add(entry.turns, timeline, SCORED_SECONDS)["der"]
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
            print(f"{entry.name:26s} {way:15s} speakers {counted}/{reference} {verdict:5s} {'warned' if warned else '':6s} "
                  f"turn ends {counts['ends right']}/{counts['ends']} words {counts['words right']}/{counts['words']} "
                  f"DER {der:.3f} {seconds:.1f} s", flush=True)
    print(f"\n{'group':20s} {'way':15s} {'count right':>11s} {'wrong warned':>12s} {'right warned':>12s} {'turn ends right':>16s} "
          f"{'words right':>12s} {'DER':>6s} {'seconds':>7s}")
    for (group, way), total in sorted(totals.items()):
        wrong = total["files"] - total["right"]
        print(f"{group:20s} {way:15s} {total['right']:>5d} of {total['files']:<3d} {total['wrong warned']:>6d} of {wrong:<3d} "
              f"{total['right warned']:>6d} of {total['right']:<3d} {total['ends right']:>8d} of {total['ends']:<4d} "
              f"{total['words right']:>5d} of {total['words']:<4d} {ders[group, way].summary()['der']:6.1%} {total['centiseconds'] / 100:7.1f}")
        print(f"{'':36s} wrong turn ends: " + ", ".join(f"{name[11:]} {total[name]}" for name in total if name.startswith("end wrong")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
