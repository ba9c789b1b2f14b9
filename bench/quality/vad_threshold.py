"""How much reference speech Silero VAD finds at each threshold, and how much non-speech it keeps.

    python bench/quality/vad_threshold.py [--manifest ../shared/dev-audio/manifest.json] [--thresholds 0.5 0.35 0.25 0.15] [--out bench-results/vad-threshold]

For every manifest entry with an RTTM (the AMI meeting excerpts, scored on their first 30 s, and
the dev conversations), the speech regions as the handler finds them (``speech_gate``'s settings,
each region widened by the 0.2-s piece padding) are compared with the union of the reference
turns on a 10-ms grid: recall is the share of reference speech inside a region, "non-speech kept"
the share of the audio inside a region but outside every turn. Silence and noise files (no RTTM)
are reported as the seconds of speech found in them (should be 0), and the scan's cost as its
time over the audio's duration. This chose ``SPEECH_THRESHOLD``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table

FRAME_S = 0.01
MEETING_SECONDS = 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=ROOT.parent / "shared" / "dev-audio" / "manifest.json")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.35, 0.25, 0.15])
    parser.add_argument("--out", type=Path, default=Path("bench-results/vad-threshold"))
    arguments = parser.parse_args(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs the dev audio", file=sys.stderr)
        return 2

    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.pipeline import speech_gate
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file
    from speaker_transcripts.pipeline.long_form import PIECE_PAD_S

    gate = speech_gate.SpeechGate()
    scored, quiet = [], []
    for entry in load_manifest(arguments.manifest):
        samples = as_float32(decode_file(entry.audio.read_bytes()).samples)
        if entry.kind == "real_meeting":
            samples = samples[: int(MEETING_SECONDS * SAMPLING_RATE)]
        if entry.turns:
            reference = np.zeros(int(len(samples) / SAMPLING_RATE / FRAME_S) + 1, dtype=bool)
            for turn in entry.turns:
                reference[int(turn.start / FRAME_S) : int(turn.end / FRAME_S)] = True
            scored.append((entry.name, entry.kind, samples, reference))
        elif entry.kind in ("silence", "noise"):
            quiet.append((entry.name, samples))

    audio_s = sum(len(samples) for _, _, samples, _ in scored) / SAMPLING_RATE
    table = Table("vad-threshold", (("threshold", "threshold", ""), ("meetings", "recall, meetings (mean)", ".1%"),
                                    ("conversations", "recall, conversations", ".1%"), ("kept", "non-speech kept (share of audio)", ".1%"),
                                    ("quiet_found_s", "speech found in silence/noise, s", ""), ("scan_share", "scan time / audio time", ".2%")))
    for threshold in arguments.thresholds:
        speech_gate.SPEECH_THRESHOLD = threshold
        recall: dict[str, list[float]] = {}
        kept = []
        scanning_s = 0.0
        for _, kind, samples, reference in scored:
            found = np.zeros_like(reference)
            pad = int(PIECE_PAD_S / FRAME_S)
            started = time.perf_counter()
            regions = gate.speech_regions(samples, 29.6)
            scanning_s += time.perf_counter() - started
            for start, end in regions:
                first, last = int(start / SAMPLING_RATE / FRAME_S), int(end / SAMPLING_RATE / FRAME_S)
                found[max(first - pad, 0) : last + pad] = True
            recall.setdefault(kind, []).append((found & reference).sum() / max(reference.sum(), 1))
            kept.append((found & ~reference).sum() / len(reference))
        quiet_found = {
            name: sum(end - start for start, end in gate.speech_regions(samples, 29.6)) / SAMPLING_RATE for name, samples in quiet
        }
        table.add(threshold=threshold, meetings=float(np.mean(recall.get("real_meeting", [np.nan]))),
                  conversations=float(np.mean(recall.get("synthetic_conversation", [np.nan]))), kept=float(np.mean(kept)),
                  quiet_found_s=quiet_found, scan_share=scanning_s / audio_s)
    table.save(arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
