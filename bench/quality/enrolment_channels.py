"""Named speakers across channels: a clip enrolled on one channel, the recording heard on another.

    .venv/bin/python bench/quality/enrolment_channels.py [--shared ../shared/dev-audio] [--channels NAME...] [--out channels.json]

How it measures, and what it reports: bench/README.md, ``enrolment_channels.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(Path(__file__).resolve().parent))
CHANNELS = {  # name: (codec, container, sample rate, bit rate)
    "wideband": None,
    "G.711 mu-law 8 kHz": ("pcm_mulaw", "wav", 8000, None),
    "AMR-NB 12.2 kbit/s": ("libopencore_amrnb", "amr", 8000, 12200),
    "Opus 8 kbit/s": ("libopus", "ogg", 16000, 8000),
}


def setup(description: str, argv: list[str] | None) -> tuple[argparse.Namespace, Any, Any, list[dict[str, Any]], dict[str, np.ndarray]]:
    """The options both channel benches take, the embedded pipeline, its speaker embedder, the cases and the impostor pool."""
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=REPOSITORY.parent / "shared" / "dev-audio")
    parser.add_argument("--model", default="pyannote-campplus")
    parser.add_argument("--channels", nargs="+", choices=list(CHANNELS), default=list(CHANNELS))
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args(argv)
    if not (arguments.shared / "manifest.json").is_file():
        parser.error(f"{arguments.shared}/manifest.json not found: the AMI excerpts lie in the project's shared folder")

    import torch
    from pyannote.audio import Pipeline

    from speaker_transcripts.models import registry as models
    from speaker_transcripts.pipeline.diarization import speaker_embedder

    torch.set_num_threads(1)
    pipeline = Pipeline.from_pretrained(models.local_path(arguments.model))
    return (arguments, pipeline, speaker_embedder(pipeline), *enrolment_cases(arguments.shared))


def main(argv: list[str] | None = None) -> int:
    arguments, pipeline, embed, cases, impostor_pool = setup(__doc__, argv)
    from enrolment import _most_overlapped

    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.bandwidth import is_narrowband, telephone_band
    from speaker_transcripts.pipeline.diarization import diarize
    from speaker_transcripts.pipeline.speaker_naming import match_names, naming_threshold

    results: dict[str, dict[str, dict[str, Any]]] = {}
    for channel in arguments.channels:
        codec = CHANNELS[channel]
        for case in cases:
            heard = case["samples"] if codec is None else heard_through(case["samples"], *codec)
            found = diarize(pipeline, heard, SAMPLING_RATE, {})
            narrow = is_narrowband(heard)
            present = {turn.speaker for turn in case["turns"]}
            impostors = {name: clip for name, clip in impostor_pool.items() if name not in present and name not in case["genuine"]}
            for method in ("as is", "band-matched"):
                matched = method == "band-matched" and narrow
                threshold = naming_threshold(matched)

                def reference(clip: np.ndarray, matched: bool = matched) -> np.ndarray:
                    return embed(telephone_band(clip) if matched else clip)

                references = {name: reference(clip) for name, clip in {**case["genuine"], **impostors}.items()}
                row = results.setdefault(channel, {}).setdefault(method, {
                    "genuine": [], "impostor": [], "right": 0, "wrong": 0, "people": 0, "impostors_named": 0, "narrowband": 0, "cases": 0,
                })
                row["cases"] += 1
                row["narrowband"] += narrow
                speakers = list(found.embeddings)
                for person in case["genuine"]:
                    own = [label for label in speakers if _most_overlapped([t for t in found.timeline if t.speaker == label], case["turns"]) == person]
                    if own:
                        row["genuine"].append(max(cosine(found.embeddings[label], references[person]) for label in own))
                for name in impostors:
                    if speakers:
                        row["impostor"].append(max(cosine(found.embeddings[label], references[name]) for label in speakers))
                for match in match_names(found.embeddings, references, threshold):
                    if match.name in impostors:
                        row["impostors_named"] += match.speaker is not None
                        continue
                    row["people"] += 1
                    if match.speaker is not None:
                        right = _most_overlapped([t for t in found.timeline if t.speaker == match.speaker], case["turns"]) == match.name
                        row["right" if right else "wrong"] += 1
            print(f"{channel:20s} {case['name']:18s} narrowband={narrow}", flush=True)
    print()
    print(f"{'channel':20s} {'method':13s} {'genuine (min / median)':>24s} {'impostor max':>13s} {'named right':>12s} {'wrong':>6s} {'impostors named':>16s}")
    for channel, methods in results.items():
        for method, row in methods.items():
            genuine = np.array(row["genuine"]) if row["genuine"] else np.array([np.nan])
            print(f"{channel:20s} {method:13s} {genuine.min():>11.2f} / {np.median(genuine):<10.2f} {max(row['impostor'], default=np.nan):>13.2f} "
                  f"{row['right']:>5d} / {row['people']:<4d} {row['wrong']:>6d} {row['impostors_named']:>16d}")
    if arguments.out:
        arguments.out.write_text(json.dumps(results, indent=1))
    return 0


def enrolment_cases(shared: Path) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The cases (recording, its reference turns, a wideband clip of each person from elsewhere) and
    the impostor pool (the committed impostor clip, one clip of every AMI participant)."""
    from enrolment import longest_alone

    from speaker_transcripts.evaluation.scoring import load_manifest, read_rttm
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file

    def cut(samples: np.ndarray, span: tuple[float, float]) -> np.ndarray:
        return samples[int(span[0] * SAMPLING_RATE):int(span[1] * SAMPLING_RATE)]

    meetings = [entry for entry in load_manifest(shared / "manifest.json") if entry.kind == "real_meeting"]
    audio = {entry.name: as_float32(decode_file(entry.audio.read_bytes()).samples) for entry in meetings}
    clips: dict[str, list[tuple[str, np.ndarray]]] = {}  # person -> (excerpt, clip)
    for entry in meetings:
        for person in sorted({turn.speaker for turn in entry.turns}):
            span = longest_alone(entry.turns, person)
            if span is not None:
                clips.setdefault(person, []).append((entry.name, cut(audio[entry.name], span)))
    samples_dir = REPOSITORY / "samples"
    cases = [{
        "name": "two-readers.wav", "samples": as_float32(decode_file((samples_dir / "two-readers.wav").read_bytes()).samples),
        "turns": read_rttm(samples_dir / "two-readers.rttm"),
        "genuine": {person: as_float32(decode_file((samples_dir / "enrolment" / f"reader-{person.lower()}.wav").read_bytes()).samples)
                    for person in ("A", "B")},
    }]
    for entry in meetings:
        present = {turn.speaker for turn in entry.turns}
        genuine = {person: clip for person in sorted(present) for excerpt, clip in clips.get(person, []) if excerpt != entry.name}
        if genuine:
            cases.append({"name": entry.name, "samples": audio[entry.name], "turns": entry.turns, "genuine": genuine})
    impostor_pool = {"impostor.wav": as_float32(decode_file((samples_dir / "enrolment" / "impostor.wav").read_bytes()).samples)}
    impostor_pool |= {person: pairs[0][1] for person, pairs in clips.items()}
    return cases, impostor_pool


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def heard_through(samples: np.ndarray, codec: str, container: str, rate: int, bit_rate: int | None) -> np.ndarray:
    """``samples`` through the codec (``tests/audio_files.py``) and back through the product's own decoder
    (which resamples to 16 kHz), as a call recording reaches it."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from tests.audio_files import through_codec

    return as_float32(decode_file(through_codec(samples, codec, container, rate, bit_rate)).samples)


if __name__ == "__main__":
    sys.exit(main())
