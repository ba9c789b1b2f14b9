"""Score transcripts and speaker attribution on a manifest of recordings with known text (and turns).

    speaker-transcripts evaluate --manifest samples/manifest.json --asr-model whisper-tiny.en --diarization-model pyannote-campplus
    speaker-transcripts evaluate --manifest ../shared/dev-audio/manifest.json --asr-model whisper-base --oracle-rttm

What is scored, and how, is evaluation/evaluate.py's docstring; the results go to --out as results.json
and results.md, and the table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from speaker_transcripts.cli import described

MANIFEST_FORMAT = """manifest format (samples/manifest.json is one):
  [{"audio": "meeting.wav",            path relative to the manifest
    "text": "the reference transcript",
    "rttm": "meeting.rttm",            optional: reference speaker turns (RTTM); DER and attribution need them
    "transcript": "meeting.turns.json", optional, with "transcript_format": "turns_json":
                                        [{"speaker": "A", "start": 0.6, "end": 3.5, "text": "..."}]
    "language": "en"}]                  optional: otherwise --language
"""


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="speaker-transcripts evaluate", description=described(__doc__), epilog=MANIFEST_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--manifest", type=Path, required=True, help="a JSON list of recordings with their text (format below)")
    parser.add_argument("--asr-model", required=True, help="embedded name (whisper-base), Hub id or folder")
    parser.add_argument("--assistant-model", help="loaded, and used for every handler run (assisted=true)")
    speakers = parser.add_mutually_exclusive_group()
    speakers.add_argument("--diarization-model", help="pyannote pipeline (Hub id or directory); DER is reported")
    speakers.add_argument("--oracle-rttm", action="store_true", help="feed each entry's reference RTTM through the seam")
    parser.add_argument("--language", default="en", help="for entries without their own 'language' (default: en)")
    parser.add_argument(
        "--long-form", choices=("vad", "chunked"), default="vad",
        help="the handler's long-form decoding (default vad); with chunked it decodes as the bare pipeline does",
    )
    parser.add_argument("--out", type=Path, default=Path("eval-results"), help="folder for results.json and results.md (default: eval-results)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        from speaker_transcripts.evaluation.evaluate import Evaluation, markdown, percent, summarise
        from speaker_transcripts.evaluation.scoring import load_manifest
    except ModuleNotFoundError as missing:
        print(f"speaker-transcripts evaluate needs the scoring libraries ({missing.name} is not installed): "
              "pip install 'speaker-transcripts[eval]'", file=sys.stderr)
        return 2
    entries = load_manifest(arguments.manifest)
    evaluation = Evaluation(arguments)
    rows = []
    for entry in entries:
        rows.append(evaluation.run(entry))
        print(f"{entry.name}: WER handler {percent(rows[-1]['handler_word']['wer'])}", flush=True)
    for row in evaluation.add_bare(entries, rows):  # after the handler, which it releases: one Whisper in memory at a time
        print(f"{row['file']}: WER bare pipeline {percent(row['bare_word']['wer'])}", flush=True)
    summary = summarise(rows)
    diarization = {kind: totals.summary() for kind, totals in evaluation.diarization_totals.items()} or None
    arguments.out.mkdir(parents=True, exist_ok=True)
    report = {"arguments": {k: str(v) for k, v in vars(arguments).items()}, "rows": rows, "summary": summary,
              "diarization": diarization}
    (arguments.out / "results.json").write_text(json.dumps(report, indent=2))
    table = markdown(rows, summary, diarization)
    (arguments.out / "results.md").write_text(table)
    print(table)
    return 0
