"""Repeated text from one-pass piece decoding: the shipped decoder (one pass + the repetition guard)
against one pass without the guard and against transformers' own passes, in one process.

    python bench/quality/repetition.py --asr-model whisper-base [--manifest ../shared/dev-audio/manifest.json] [--minutes 10] [--runs 3] [--decoders shipped one-pass-no-guard transformers-passes] [--out bench-results/repetition]

How it measures, and what it reports: bench/README.md, ``repetition.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "speed"))  # bench/speed/long_form.py's long-file recipe
from bench.results import Table

SHARED = ROOT.parent / "shared"
DEV_AUDIO = SHARED / "dev-audio"
DECODERS = ("shipped", "one-pass-no-guard", "transformers-passes")
LABELS = {"shipped": "shipped", "one-pass-no-guard": "one-pass, no guard", "transformers-passes": "transformers' passes"}
RUN_WORDS = 6
SENTENCE_WORDS = 4
WINDOW_S = 30.0
REFERENCE_SLACK_S = 10.0
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--manifest", type=Path, default=DEV_AUDIO / "manifest.json")
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the built long file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--decoders", nargs="+", choices=DECODERS, default=list(DECODERS), help="the rows to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/repetition"))
    return parser.parse_args(argv)


@dataclass
class BenchFile:
    """Samples, their reference text (None: none), and each reference word's time on the audio's clock."""

    name: str
    kind: str  # "dev", "long" or "meetings"
    samples: np.ndarray
    reference: str | None
    reference_times: list[tuple[str, float]] = field(default_factory=list)  # (normalised word, seconds)

    @property
    def seconds(self) -> float:
        from speaker_transcripts.pipeline.audio import SAMPLING_RATE

        return len(self.samples) / SAMPLING_RATE


def spread(text: str, start: float, end: float, normalise: Callable[[str], str]) -> list[tuple[str, float]]:
    """``text``'s normalised words placed evenly over ``start``-``end``."""
    from speaker_transcripts.evaluation.scoring import words_of

    words = words_of(text, normalise)
    step = (end - start) / max(len(words), 1)
    return [(word, start + (index + 0.5) * step) for index, word in enumerate(words)]


def long_file_clips(entries: list[Any], clips: list[np.ndarray], samples: np.ndarray, seed: int = 0) -> list[tuple[int, float, float]]:
    """Where ``build_long_file`` put each clip: (entry index, start s, end s), found by replaying its
    seeded draws and checked against the samples (a changed recipe fails here, not silently)."""
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE

    rng = np.random.default_rng(seed)
    placed = []
    position = 0
    index = 0
    while position < len(samples):
        clip = clips[index % len(clips)]
        if not np.array_equal(samples[position : position + len(clip)], clip):
            raise RuntimeError(f"bench/speed/long_form.build_long_file no longer lays the clips out as this benchmark replays it (clip {index})")
        placed.append((index % len(clips), position / SAMPLING_RATE, (position + len(clip)) / SAMPLING_RATE))
        position += len(clip)
        gap = rng.uniform(8.0, 30.0) if index % 3 == 2 else rng.uniform(0.4, 2.5)
        rng.standard_normal(int(gap * SAMPLING_RATE))  # the quiet's draws, to stay in step
        position += int(gap * SAMPLING_RATE)
        index += 1
    if position != len(samples):
        raise RuntimeError("bench/speed/long_form.build_long_file's long file is not as long as replayed")
    return placed


def benchmark_files(manifest: Path, minutes: float, normalise: Callable[[str], str]) -> list[BenchFile]:
    from long_form import build_long_file

    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    entries = load_manifest(manifest)
    with_text = [entry for entry in entries if entry.text]
    files = []
    clips = []
    for entry in with_text:
        samples = as_float32(decode_file(entry.audio.read_bytes()).samples)
        clips.append(samples)
        file = BenchFile(entry.name, "dev", samples, entry.text)
        file.reference_times = spread(entry.text, 0.0, file.seconds, normalise)
        files.append(file)
    long_samples, long_text, _ = build_long_file(with_text, minutes)
    long = BenchFile("long", "long", long_samples, long_text)
    for index, start, end in long_file_clips(with_text, clips, long_samples):
        long.reference_times += spread(with_text[index].text, start, end, normalise)
    files.append(long)
    meetings = [entry for entry in entries if entry.audio.parent.name == "meetings"]
    if meetings:
        samples = np.concatenate([as_float32(decode_file(entry.audio.read_bytes()).samples) for entry in meetings])
        files.append(BenchFile(f"meetings ({len(meetings)} AMI excerpts)", "meetings", samples, None))
    return files


@contextmanager
def decoder_patched(decoder: str) -> Iterator[None]:
    """The patches that make ``decoder`` out of the shipped code, undone on leaving."""
    from speaker_transcripts.pipeline import asr

    with ExitStack() as stack:
        if decoder == "one-pass-no-guard":
            stack.enter_context(mock.patch.object(asr, "looping", lambda text: None))
        elif decoder == "transformers-passes":

            @contextmanager
            def options_unchanged(self: Any, pieces: Any, options: dict[str, Any], shortest_window_s: float | None = None) -> Iterator[dict[str, Any]]:
                yield options

            stack.enter_context(mock.patch.object(asr.SpeechRecognizer, "_one_pass_per_piece", options_unchanged))
        yield


@contextmanager
def decoded_again_recorded(into: list[dict[str, Any]]) -> Iterator[None]:
    """Each piece ``SpeechRecognizer._decoded_again`` decodes again: where, why, and what came of it."""
    from speaker_transcripts.pipeline import asr
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.transcript import joined_text

    original = asr.SpeechRecognizer._decoded_again

    def recorded(self: Any, samples: np.ndarray, piece: Any, duration: float, options: dict[str, Any], reason: str,
                 fallback_temperatures: Any) -> Any:
        chunks = original(self, samples, piece, duration, options, reason, fallback_temperatures)
        into.append({"start": piece.start / SAMPLING_RATE, "end": piece.end / SAMPLING_RATE, "reason": reason, "text_after": joined_text(chunks)})
        return chunks

    with mock.patch.object(asr.SpeechRecognizer, "_decoded_again", recorded):
        yield


def _chunk_text_start(chunk: Any) -> tuple[str, float]:
    if isinstance(chunk, dict):
        start = chunk["timestamp"][0] if "timestamp" in chunk else chunk["start"]
        return chunk["text"], float(start or 0.0)
    return chunk.text, float(chunk.start)


def repeated_runs(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Chunks whose text holds a run of ``RUN_WORDS`` words twice."""
    from speaker_transcripts.pipeline.repetition import repeated_run

    found = []
    for chunk in result["chunks"]:
        text, start = _chunk_text_start(chunk)
        run = repeated_run(text, size=RUN_WORDS)
        if run is not None:
            found.append({"at_s": round(start, 2), "run": run, "text": text.strip()})
    return found


def sentences(result: dict[str, Any], normalise: Callable[[str], str]) -> list[tuple[float, tuple[str, ...], str]]:
    """(time, normalised words, text) of the transcript's sentences of ``SENTENCE_WORDS`` words or more,
    across chunks; a sentence's time is the start of the chunk it begins in."""
    from speaker_transcripts.evaluation.scoring import words_of

    found = []
    pending, pending_start = "", 0.0
    for chunk in result["chunks"]:
        text, start = _chunk_text_start(chunk)
        parts = _SENTENCE_END.split(text.strip())
        for number, part in enumerate(parts):
            if not pending:
                pending_start = start
            pending = f"{pending} {part}".strip()
            if number < len(parts) - 1 or re.search(r"[.?!]$", part):
                found.append((pending_start, pending))
                pending = ""
    if pending:
        found.append((pending_start, pending))
    return [(at, tuple(words), text) for at, text in found if len(words := words_of(text, normalise)) >= SENTENCE_WORDS]


def occurrences(words: tuple[str, ...], reference_times: list[tuple[str, float]]) -> list[float]:
    """Times of ``words`` as a run in the timed reference words."""
    reference = [word for word, _ in reference_times]
    size = len(words)
    return [reference_times[i][1] for i in range(len(reference) - size + 1) if tuple(reference[i : i + size]) == words]


def repeated_sentences(result: dict[str, Any], file: BenchFile, normalise: Callable[[str], str]) -> list[dict[str, Any]]:
    """Sentences written twice within ``WINDOW_S`` that the reference does not hold twice there."""
    written = sentences(result, normalise)
    found = []
    for i, (first_at, words, first_text) in enumerate(written):
        for second_at, other, second_text in written[i + 1 :]:
            if other != words or second_at - first_at > WINDOW_S:
                continue
            if file.reference is not None:
                low, high = first_at - REFERENCE_SLACK_S, second_at + REFERENCE_SLACK_S
                if sum(low <= at <= high for at in occurrences(words, file.reference_times)) >= 2:
                    continue  # said twice there
            found.append({"first_s": round(first_at, 2), "second_s": round(second_at, 2), "sentence": second_text, "first": first_text})
    return found


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if not SHARED.is_dir() and arguments.manifest == DEV_AUDIO / "manifest.json":
        print(f"no {SHARED}: this benchmark needs the dev audio (../shared/dev-audio next to the repository)", file=sys.stderr)
        return 2
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs the dev audio (../shared/dev-audio)", file=sys.stderr)
        return 2
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import english_normaliser, word_errors, words_of
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.transcriber import Transcriber

    normalise = english_normaliser()
    files = benchmark_files(arguments.manifest, arguments.minutes, normalise)
    print(f"{len(files)} files, {sum(file.seconds for file in files) / 60:.1f} min of audio; loading {arguments.asr_model}", file=sys.stderr)
    handler = Transcriber(settings=ModelSettings(asr_model=arguments.asr_model, diarization_model=None))
    parameters = {"language": "en", "return_timestamps": "segment", "long_form": "vad", "num_beams": 1}

    timings: dict[tuple[str, str], list[float]] = {}
    results: dict[tuple[str, str], dict[str, Any]] = {}
    again: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in range(arguments.runs):
        for file in files:
            for decoder in arguments.decoders:  # interleaved: each file by every decoder in turn
                redecoded: list[dict[str, Any]] = []
                with decoder_patched(decoder), decoded_again_recorded(redecoded):
                    started = time.perf_counter()
                    result = handler({"inputs": {"array": file.samples, "sampling_rate": SAMPLING_RATE}, "parameters": parameters})
                    seconds = time.perf_counter() - started
                timings.setdefault((decoder, file.name), []).append(seconds)
                results[(decoder, file.name)] = result
                again[(decoder, file.name)] = redecoded
                print(f"run {run + 1}/{arguments.runs} {file.name} {decoder}: {seconds:.1f} s, {len(redecoded)} pieces decoded again", file=sys.stderr)

    report: dict[str, Any] = {
        "asr_model": arguments.asr_model,
        "runs": arguments.runs,
        "files": {file.name: {"kind": file.kind, "seconds": file.seconds} for file in files},
        "decoders": {},
    }
    for decoder in arguments.decoders:
        dev_total = None
        per_file = {}
        for file in files:
            result = results[(decoder, file.name)]
            entry: dict[str, Any] = {
                "kind": file.kind,
                "seconds": statistics.median(timings[(decoder, file.name)]),
                "repeated_runs": repeated_runs(result),
                "repeated_sentences": repeated_sentences(result, file, normalise),
                "decoded_again": again[(decoder, file.name)],
                "text": result["text"],
            }
            if file.reference is not None:
                counts = word_errors(words_of(file.reference, normalise), words_of(result["text"], normalise))
                entry["wer"] = counts.rate
                if file.kind == "dev":
                    dev_total = counts if dev_total is None else dev_total + counts
            per_file[file.name] = entry
        report["decoders"][decoder] = {"dev_files_wer": dev_total.rate if dev_total else None, "files": per_file}
    arguments.out.mkdir(parents=True, exist_ok=True)
    (arguments.out / "results.json").write_text(json.dumps(report, indent=2))
    _table(report).save(arguments.out)  # printed a row at a time
    print()
    print(_repetitions(report))
    return 0


def _by_kind(files: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in files.values() if item["kind"] == kind]


def _table(report: dict[str, Any]) -> Table:
    table = Table.of_headers("repetition", (
        "decoder", "dev WER", "long WER", "dev s", "long s", "meetings s", "6-word runs (dev / long / meetings)",
        "repeated sentences (dev / long / meetings)", "pieces decoded again (dev / long / meetings)"))
    for decoder, data in report["decoders"].items():
        files = data["files"]

        def total(key: str, kind: str, files: dict[str, Any] = files) -> str:
            items = _by_kind(files, kind)
            return str(sum(len(item[key]) for item in items)) if items else "-"

        def seconds(kind: str, files: dict[str, Any] = files) -> str:
            items = _by_kind(files, kind)
            return f"{sum(item['seconds'] for item in items):.1f}" if items else "-"

        long = _by_kind(files, "long")
        dev_wer = data["dev_files_wer"]
        cells = [
            LABELS[decoder],
            f"{dev_wer:.1%}" if dev_wer is not None else "-",
            f"{long[0]['wer']:.1%}" if long else "-",
            seconds("dev"),
            seconds("long"),
            seconds("meetings"),
            " / ".join(total("repeated_runs", kind) for kind in ("dev", "long", "meetings")),
            " / ".join(total("repeated_sentences", kind) for kind in ("dev", "long", "meetings")),
            " / ".join(total("decoded_again", kind) for kind in ("dev", "long", "meetings")),
        ]
        table.add_cells(*cells)
    return table


def _repetitions(report: dict[str, Any]) -> str:
    lines = []
    for decoder, data in report["decoders"].items():
        lines.append(f"### {LABELS[decoder]}")
        anything = False
        for name, item in data["files"].items():
            for found in item["repeated_runs"]:
                anything = True
                lines.append(f"- {name} @ {found['at_s']:.1f} s, run {found['run']!r} in chunk: {found['text']!r}")
            for found in item["repeated_sentences"]:
                anything = True
                lines.append(f"- {name}: sentence at {found['first_s']:.1f} s written again at {found['second_s']:.1f} s: {found['sentence']!r}")
            for found in item["decoded_again"]:
                lines.append(f"- {name}: piece {found['start']:.1f}-{found['end']:.1f} s decoded again ({found['reason']}); now: {found['text_after']!r}")
        if not anything:
            lines.append("- no repetitions")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
