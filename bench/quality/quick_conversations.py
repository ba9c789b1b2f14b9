"""Short, quick conversations made from the dev recordings' own voices, with their RTTM.

    .venv/bin/python bench/quality/quick_conversations.py --shared ../shared/dev-audio --out /tmp/quick [--per-kind N] [--seed 0]

How it measures, and what it reports: bench/README.md, ``quick_conversations.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SAMPLING_RATE = 16000
LEVEL_DBFS = -24.0
KINDS = {  # name: (voices, seconds, noisy)
    "quick2": (2, 26.0, False),
    "quick2_noisy": (2, 26.0, True),
    "quick3_noisy": (3, 30.0, True),
    "solo": (1, 26.0, False),  # one voice the same way: where a check that splits speakers must not split
}
TURN_S = (0.6, 2.5)
GAP_S = (0.05, 0.5)
SNR_DB = 10.0


@dataclass(frozen=True)
class Stretch:
    """Where one voice speaks alone in a source file."""

    voice: str
    source: Path
    start: float
    end: float


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2].parent / "shared" / "dev-audio")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-kind", type=int, help="conversations of each kind (default: one per group of voices that has enough)")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args(argv)
    manifest = arguments.shared / "manifest.json"
    if not manifest.is_file():
        parser.error(f"{manifest} not found: this benchmark builds on the shared dev audio (../shared/dev-audio)")

    from speaker_transcripts.evaluation.scoring import load_manifest
    from tests.audio_files import pcm_wav

    entries = [entry for entry in load_manifest(manifest) if entry.turns and entry.audio.suffix == ".wav"]
    entries = [entry for entry in entries if not entry.name.startswith("short_")]
    stretches = [stretch for entry in entries for stretch in alone(entry.name, entry.audio, entry.turns)]
    groups = voice_groups(stretches)
    noise = source_audio(arguments.shared / "noise_10s_pink.wav", {})
    random = np.random.default_rng(arguments.seed)
    audio_cache: dict[Path, np.ndarray] = {}
    arguments.out.mkdir(parents=True, exist_ok=True)
    listed = []
    for kind, (voices, seconds, noisy) in KINDS.items():
        usable = [group for group in groups if len(group) >= voices]
        for index in range(arguments.per_kind or len(usable)):
            group = usable[index % len(usable)]
            chosen = [str(voice) for voice in random.choice(sorted(group), size=voices, replace=False)]
            name = f"{kind}_{index:02d}"
            samples, turns = conversation(chosen, stretches, seconds, random, audio_cache)
            if noisy:
                samples = samples + scaled_noise(noise, samples, random)
            (arguments.out / f"{name}.wav").write_bytes(pcm_wav(samples))
            (arguments.out / f"{name}.rttm").write_text("".join(
                f"SPEAKER {name} 1 {start:.3f} {end - start:.3f} <NA> <NA> {voice} <NA> <NA>\n" for voice, start, end in turns
            ))
            listed.append({"audio": f"{name}.wav", "rttm": f"{name}.rttm", "kind": "one_voice" if voices == 1 else "quick_conversation",
                           "num_speakers": voices})
            print(f"{name}: {len(turns)} turns of {', '.join(chosen)}", flush=True)
    (arguments.out / "manifest.json").write_text(json.dumps(listed, indent=1))
    print(f"wrote {len(listed)} conversations and {arguments.out / 'manifest.json'}")
    return 0


def alone(name: str, audio: Path, turns: list) -> list[Stretch]:
    """Stretches of at least ``TURN_S[0]`` where exactly one reference speaker talks. AMI
    participant ids name people across excerpts; other labels are only unique in their file."""
    meeting = audio.parent.name == "meetings"
    stretches = []
    for turn in turns:
        start, end = turn.start, turn.end
        for other in turns:
            if other is turn or other.end <= start or other.start >= end:
                continue
            if other.start <= start:
                start = max(start, other.end)
            else:
                end = min(end, other.start)
        if end - start >= TURN_S[0]:
            voice = turn.speaker if meeting else f"{Path(name).stem}:{turn.speaker}"
            stretches.append(Stretch(voice, audio, start, end))
    return stretches


def voice_groups(stretches: list[Stretch]) -> list[set[str]]:
    """Voices heard in one source file, merged where files share a voice (one AMI meeting's
    people), so a conversation's voices come from one room."""
    groups: list[set[str]] = []
    for source in dict.fromkeys(stretch.source for stretch in stretches):
        voices = {stretch.voice for stretch in stretches if stretch.source == source}
        for group in [group for group in groups if group & voices]:
            groups.remove(group)
            voices |= group
        groups.append(voices)
    return sorted(groups, key=lambda group: sorted(group))


def conversation(
    voices: list[str], stretches: list[Stretch], seconds: float, random: np.random.Generator, cache: dict[Path, np.ndarray]
) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """Turns of ``TURN_S`` from random stretches of each voice, the next voice never the last one
    (with one voice, always it)."""
    out = np.zeros(int(seconds * SAMPLING_RATE), dtype=np.float32)
    turns: list[tuple[str, float, float]] = []
    at, voice = float(random.uniform(*GAP_S)), str(random.choice(voices))
    while True:
        own = [stretch for stretch in stretches if stretch.voice == voice]
        stretch = own[int(random.integers(len(own)))]
        length = min(float(random.uniform(*TURN_S)), stretch.end - stretch.start)
        if at + length > seconds:
            break
        offset = float(random.uniform(stretch.start, max(stretch.start, stretch.end - length)))
        piece = leveled(source_audio(stretch.source, cache)[int(offset * SAMPLING_RATE):int((offset + length) * SAMPLING_RATE)])
        first = int(at * SAMPLING_RATE)
        out[first:first + len(piece)] = piece
        turns.append((voice, at, at + len(piece) / SAMPLING_RATE))
        at += length + float(random.uniform(*GAP_S))
        voice = str(random.choice([other for other in voices if other != voice] or voices))
    return out, turns


def source_audio(path: Path, cache: dict[Path, np.ndarray]) -> np.ndarray:
    """The product's own decoding (mono float32 at 16 kHz), once per file."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    if path not in cache:
        cache[path] = as_float32(decode_file(path.read_bytes(), 3600).samples)
    return cache[path]


def leveled(piece: np.ndarray) -> np.ndarray:
    """``piece`` at ``LEVEL_DBFS`` RMS, with 10-ms fades so the cuts do not click."""
    rms = float(np.sqrt(np.mean(piece**2))) or 1.0
    piece = piece * (10 ** (LEVEL_DBFS / 20) / rms)
    fade = min(len(piece) // 2, SAMPLING_RATE // 100)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    piece[:fade] *= ramp
    piece[len(piece) - fade:] *= ramp[::-1]
    return piece.astype(np.float32)


def scaled_noise(noise: np.ndarray, speech: np.ndarray, random: np.random.Generator) -> np.ndarray:
    """Pink noise tiled over ``speech``, from a random start, at ``SNR_DB`` below its voiced RMS."""
    tiled = np.roll(np.tile(noise, len(speech) // len(noise) + 1), int(random.integers(len(noise))))[: len(speech)]
    voiced = speech[np.abs(speech) > 1e-4]
    target = float(np.sqrt(np.mean(voiced**2))) * 10 ** (-SNR_DB / 20)
    return (tiled * (target / float(np.sqrt(np.mean(tiled**2))))).astype(np.float32)


if __name__ == "__main__":
    sys.exit(main())
