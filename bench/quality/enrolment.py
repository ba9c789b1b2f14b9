"""Named speakers: words on the right *named* speaker, impostors refused, and what enrolment costs.

    .venv/bin/python bench/quality/enrolment.py [--manifest ../shared/dev-audio/manifest.json] [--asr-model whisper-base]

How it measures, and what it reports: bench/README.md, ``enrolment.py``.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]
SAMPLES = REPOSITORY / "samples"
COMMITTED = "esp_us_f3 (samples/enrolment/impostor.wav)"
COMMITTED_VOICE = {"engine": "espeak-ng", "voice": "en-us+f3"}
TIMING_REPEATS = 3  # diarization runs of each file with and without its clips (the fastest of each counts)
ENROLMENT_TEXT = (
    "Please water the plants on the balcony before the weekend, and call me when the train arrives."
)
SCORED_SECONDS = 30.0  # the meeting references cover the first 30 s
MIN_ALONE_S, MAX_CLIP_S = 2.0, 6.0


def synthesise(voice: dict[str, Any], text: str, folder: Path) -> bytes:
    """``text`` in a manifest voice (engine and settings as the conversation was made)."""
    out = folder / f"{voice['voice_id']}.wav"
    engine = voice["engine"]
    if engine == "espeak-ng":
        command = ["espeak-ng", "-v", voice["voice"], "-w", str(out)]
        command += [option for key, flag in (("pitch", "-p"), ("speed", "-s")) if key in voice for option in (flag, str(voice[key]))]
        subprocess.run([*command, text], check=True)
    elif engine == "festival":
        subprocess.run(["text2wave", "-eval", f"({voice['voice']})", "-o", str(out)], input=text.encode(), check=True)
    elif engine == "flite":
        subprocess.run(["flite", "-voice", voice["voice"], "-t", text, "-o", str(out)], check=True)
    else:
        raise SystemExit(f"no synthesiser for engine {engine!r}")
    return out.read_bytes()


def same_voice(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """espeak-ng's variants (``+f3``) are one formant voice whatever the language or pitch: two
    clips of the same variant are the same voice, not an impostor (they measured 0.87 alike)."""
    if one["engine"] != other["engine"]:
        return False
    if one["engine"] != "espeak-ng":
        return one["voice"] == other["voice"]
    return one["voice"].partition("+")[2] == other["voice"].partition("+")[2]


def encoded(audio: bytes) -> str:
    return base64.b64encode(audio).decode("ascii")


def longest_alone(turns: list[Any], speaker: str) -> tuple[float, float] | None:
    """The speaker's longest stretch with nobody else talking, within the scored span."""
    others = [(turn.start, turn.end) for turn in turns if turn.speaker != speaker]
    best: tuple[float, float] | None = None
    for turn in (turn for turn in turns if turn.speaker == speaker):
        cuts = sorted([turn.start, min(turn.end, SCORED_SECONDS)] + [edge for start, end in others for edge in (start, end)
                                                                     if turn.start < edge < min(turn.end, SCORED_SECONDS)])
        for start, end in itertools.pairwise(cuts):
            middle = (start + end) / 2
            alone = not any(other_start <= middle < other_end for other_start, other_end in others)
            if alone and (best is None or end - start > best[1] - best[0]):
                best = (start, end)
    if best is None or best[1] - best[0] < MIN_ALONE_S:
        return None
    return best[0], min(best[1], best[0] + MAX_CLIP_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=REPOSITORY.parent / "shared" / "dev-audio" / "manifest.json")
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    arguments = parser.parse_args(argv)
    if not arguments.manifest.is_file():
        raise SystemExit(f"{arguments.manifest}: no such manifest (the dev audio lies in the project's shared folder)")

    from pyannote.core import Segment, Timeline
    from pyannote.metrics.identification import IdentificationErrorRate

    from speaker_transcripts import ModelSettings, Transcriber
    from speaker_transcripts.errors import InvalidRequestError
    from speaker_transcripts.evaluation.scoring import (
        annotation_of,
        attribution,
        english_normaliser,
        load_manifest,
        named_attribution,
        words_of,
    )
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file
    from speaker_transcripts.pipeline.diarization import Turn
    from speaker_transcripts.pipeline.speaker_naming import NAMING_THRESHOLD
    from tests.audio_files import pcm_wav

    transcriber = Transcriber(ModelSettings.self_hosted().model_copy(update={"asr_model": arguments.asr_model}))
    normalise = english_normaliser()
    manifest = json.loads(arguments.manifest.read_text())
    voices = {speaker["voice_id"]: speaker for item in manifest for speaker in (item.get("speakers") or {}).values()}
    entries = {entry.name: entry for entry in load_manifest(arguments.manifest)}
    scratch = Path(tempfile.mkdtemp(prefix="enrolment-"))
    synthetic = {voice_id: encoded(synthesise(voice, ENROLMENT_TEXT, scratch)) for voice_id, voice in voices.items()}
    committed_impostor = encoded((SAMPLES / "enrolment" / "impostor.wav").read_bytes())
    synthetic[COMMITTED] = committed_impostor

    cases: list[dict[str, Any]] = []
    for item in manifest:
        if item.get("kind") != "synthetic_conversation":
            continue
        own = {label: speaker["voice_id"] for label, speaker in item["speakers"].items()}
        impostors = {f"impostor {voice_id}": synthetic[voice_id] for voice_id, voice in {**voices, COMMITTED: COMMITTED_VOICE}.items()
                     if not any(same_voice(voice, voices[mine]) for mine in own.values())}
        cases.append({"entry": entries[Path(item["audio"]).name], "known": {label: synthetic[own[label]] for label in own},
                      "impostors": impostors})
    sample_turns = [("A", "go forward ten meters"), ("B", entries["librivox_sense_and_sensibility_01_austen_64kb-0870.wav"].text),
                    ("A", "go forward ten meters")]
    cases.append({
        "entry": type(next(iter(entries.values())))(
            name="two-readers.wav", audio=SAMPLES / "two-readers.wav", text=" ".join(text for _, text in sample_turns), turns=[],
            speaker_texts=sample_turns,
        ),
        "known": {label: encoded((SAMPLES / "enrolment" / f"reader-{label.lower()}.wav").read_bytes()) for label in ("A", "B")},
        "impostors": {f"impostor {v}": c for v, c in synthetic.items()},
    })
    for item in manifest:
        if item.get("kind") != "real_meeting":
            continue
        entry = entries[Path(item["audio"]).name]
        samples = as_float32(decode_file(entry.audio.read_bytes()).samples)
        known, held_out = {}, []
        for speaker in sorted({turn.speaker for turn in entry.turns}):
            span = longest_alone(entry.turns, speaker)
            if span is not None:
                known[speaker] = encoded(pcm_wav(samples[int(span[0] * SAMPLING_RATE) : int(span[1] * SAMPLING_RATE)]))
                held_out.append(span)
        cases.append({"entry": entry, "known": known, "held_out": held_out,
                      "impostors": {f"impostor {v}": c for v, c in synthetic.items()}})

    genuine, impostor_scores, rows = [], [], []
    totals = {"named_right": 0, "anonymous_right": 0, "words": 0, "wrongly_named": 0, "named": 0, "impostors_named": 0, "impostors": 0,
              "impostors_named_alone": 0}
    meeting_metric = IdentificationErrorRate()
    print(f"{'file':34} {'named right':>11} {'anon. right':>11} {'wrong names':>11} {'impostors named':>15} {'extra s':>8}")
    for case in cases:
        entry = case["entry"]
        audio = entry.audio.read_bytes()
        plain = transcriber({"inputs": audio})
        while True:  # a meeting speaker's stretch alone may hold too little speech to enrol: they stay unnamed
            known = [{"name": name, "audio": clip} for name, clip in {**case["known"], **case["impostors"]}.items()]
            try:
                result = transcriber({"inputs": audio, "parameters": {"known_speakers": known}})
            except InvalidRequestError as error:
                refused = str(error).split("'")[1]
                print(f"  {entry.name}: {refused} not enrolled ({error})")
                del case["known"][refused]
                continue
            break
        # The cost of the clips, timed on diarization alone (task=diarize): ASR's time would drown it.
        plain_s, enrolled_s = float("inf"), float("inf")
        for _ in range(TIMING_REPEATS):
            for parameters in ({"task": "diarize"}, {"task": "diarize", "known_speakers": known}):
                started = time.perf_counter()
                transcriber({"inputs": audio, "parameters": parameters})
                seconds = time.perf_counter() - started
                if "known_speakers" in parameters:
                    enrolled_s = min(enrolled_s, seconds)
                else:
                    plain_s = min(plain_s, seconds)
        report = {match["name"]: match for match in result["known_speakers"]}
        hypothesis = [Turn(**turn) for turn in result["diarization"]]
        row: dict[str, Any] = {"file": entry.name, "extra_s": round(enrolled_s - plain_s, 2), "clips": len(known), "known": report}
        # which reference speaker each named voice is (by time) decides whether its name is right
        reference_turns = entry.turns or _named_reference(plain, entry, normalise)
        wrong = 0
        for name in case["known"]:
            if report[name]["named"]:
                totals["named"] += 1
                right = _most_overlapped([turn for turn in hypothesis if turn.speaker == name], reference_turns) == name
                wrong += not right
                (genuine if right else impostor_scores).append(report[name]["similarity"])
        totals["wrongly_named"] += wrong
        for name in case["impostors"]:
            totals["impostors"] += 1
            totals["impostors_named"] += report[name]["named"]
            similarity = report[name]["similarity"]
            if similarity is not None:
                impostor_scores.append(similarity)
                totals["impostors_named_alone"] += similarity >= NAMING_THRESHOLD
        if entry.speaker_texts:
            reference = entry.reference_speaker_words(normalise)
            words = [(word, s["speaker"]) for s in result["speakers"] for word in words_of(s["text"], normalise)]
            anonymous = [(word, s["speaker"]) for s in plain["speakers"] for word in words_of(s["text"], normalise)]
            named_right, anonymous_right = named_attribution(reference, words).correct, attribution(reference, anonymous).correct
            totals["named_right"] += named_right
            totals["anonymous_right"] += anonymous_right
            totals["words"] += len(reference)
            row.update(named_right=named_right, anonymous_right=anonymous_right, words=len(reference))
            score = f"{named_right / len(reference):11.1%} {anonymous_right / len(reference):11.1%}"
        else:
            uem = Timeline([Segment(0, SCORED_SECONDS)]).extrude(Timeline([Segment(*span) for span in case["held_out"]]))
            detail = meeting_metric(annotation_of(entry.turns), annotation_of(hypothesis), uem=uem, detailed=True)
            row["named_speech_share"] = 1 - detail["identification error rate"]
            score = f"{row['named_speech_share']:11.1%} {'(time)':>11}"
        impostors_named = sum(report[name]["named"] for name in case["impostors"])
        row.update(wrongly_named=wrong, impostors_named=impostors_named)
        print(f"{entry.name[:34]:34} {score} {wrong:>11} {impostors_named:>15} {row['extra_s']:8.2f}", flush=True)
        rows.append(row)
    print()
    print(f"words on the right named speaker: {totals['named_right']}/{totals['words']} "
          f"({totals['named_right'] / max(totals['words'], 1):.1%}); anonymous attribution right: "
          f"{totals['anonymous_right']}/{totals['words']} ({totals['anonymous_right'] / max(totals['words'], 1):.1%}); "
          f"named / anonymous: {totals['named_right'] / max(totals['anonymous_right'], 1):.1%}")
    print(f"meetings: speech under the right name {1 - abs(meeting_metric):.1%} (1 - identification error rate, held-out clips excluded)")
    print(f"names given: {totals['named']}, wrong: {totals['wrongly_named']}; impostors named: {totals['impostors_named']}/{totals['impostors']} "
          f"(beside the file's own clips), {totals['impostors_named_alone']} had they been sent alone (similarity >= {NAMING_THRESHOLD:g})")
    extra = sorted(row["extra_s"] / row["clips"] for row in rows)
    print(f"time the clips added to diarization (fastest of {TIMING_REPEATS} runs each): median {extra[len(extra) // 2]:.3f} s "
          f"per clip, {min(extra):.3f}-{max(extra):.3f} s; with {max(row['clips'] for row in rows)} clips at most "
          f"{max(row['extra_s'] for row in rows):.2f} s a file")
    print(f"similarity of clips to their own voice: {min(genuine, default=float('nan')):.2f}-{max(genuine, default=float('nan')):.2f}; "
          f"closest similarity of impostor (or wrongly named) clips: {max(impostor_scores, default=float('nan')):.2f}")
    if arguments.out:
        arguments.out.write_text(json.dumps({"rows": rows, "totals": totals, "genuine": genuine, "impostor": impostor_scores}, indent=1))
    return 0


def _most_overlapped(turns: list[Any], reference: list[Any]) -> str | None:
    """The reference speaker who talks most during ``turns``."""
    overlap: dict[str, float] = {}
    for turn in turns:
        for other in reference:
            shared = min(turn.end, other.end) - max(turn.start, other.start)
            if shared > 0:
                overlap[other.speaker] = overlap.get(other.speaker, 0.0) + shared
    return max(overlap, key=overlap.__getitem__) if overlap else None


def _named_reference(plain: dict[str, Any], entry: Any, normalise: Any) -> list[Any]:
    """Reference turns for a file without an RTTM: the anonymous run's turns, relabelled with the
    reference speaker its words map to (best mapping of attribution)."""
    from speaker_transcripts.evaluation.scoring import attribution, words_of
    from speaker_transcripts.pipeline.diarization import Turn

    words = [(word, s["speaker"]) for s in plain["speakers"] for word in words_of(s["text"], normalise)]
    mapping = attribution(entry.reference_speaker_words(normalise), words).mapping
    return [Turn(mapping.get(turn["speaker"], turn["speaker"]), turn["start"], turn["end"]) for turn in plain["diarization"]]


if __name__ == "__main__":
    sys.path.insert(0, str(REPOSITORY))
    sys.exit(main())
