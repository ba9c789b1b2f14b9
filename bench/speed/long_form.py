"""Long-form decoding side by side: speech-aligned pieces vs the chunked pipeline vs Whisper's
own sequential long form, on every dev file with text and on a built 10-minute file.

    python bench/speed/long_form.py --asr-model whisper-base [--manifest ../shared/dev-audio/manifest.json] [--minutes 10] [--runs 3] [--decoders vad chunked sequential] [--out bench-results/long-form]

How it measures, and what it reports: bench/README.md, ``long_form.py``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table

DEV_AUDIO = ROOT.parent / "shared" / "dev-audio"
DECODERS = ("vad", "chunked", "sequential")
SILENCE_MARGIN_S = 0.5  # a word this close to an inserted silence's edge may be a real word's tail


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--manifest", type=Path, default=DEV_AUDIO / "manifest.json")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--decoders", nargs="+", choices=DECODERS, default=list(DECODERS), help="the rows to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/long-form"))
    parser.add_argument("--worker", choices=DECODERS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def build_long_file(entries: list[Any], minutes: float, seed: int = 0) -> tuple[np.ndarray, str, list[tuple[float, float]]]:
    """The recipe in the module doc: samples, reference text, inserted silences (start, end)."""
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file

    rng = np.random.default_rng(seed)
    clips = [(as_float32(decode_file(entry.audio.read_bytes()).samples), entry.text) for entry in entries]
    pieces: list[np.ndarray] = []
    texts: list[str] = []
    silences: list[tuple[float, float]] = []
    position = 0
    index = 0
    while position < minutes * 60 * SAMPLING_RATE:
        samples, text = clips[index % len(clips)]
        pieces.append(samples)
        texts.append(text)
        position += len(samples)
        gap = rng.uniform(8.0, 30.0) if index % 3 == 2 else rng.uniform(0.4, 2.5)
        quiet = (rng.standard_normal(int(gap * SAMPLING_RATE)) * 10 ** (-70 / 20)).astype(np.float32)
        if gap >= 8.0:
            silences.append((position / SAMPLING_RATE, (position + len(quiet)) / SAMPLING_RATE))
        pieces.append(quiet)
        position += len(quiet)
        index += 1
    return np.concatenate(pieces), " ".join(texts), silences


def benchmark_files(manifest: Path, out: Path, minutes: float) -> tuple[dict[str, tuple[Path, str, float]], list[tuple[float, float]]]:
    """The dev files with text and the built long file (``"long"``), saved as 16-kHz ``.npy`` in
    ``out`` for the workers: name -> (path, reference text, seconds); and the long file's inserted silences."""
    from speaker_transcripts.evaluation.scoring import load_manifest
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32, decode_file

    entries = [entry for entry in load_manifest(manifest) if entry.text]
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, tuple[Path, str, float]] = {}
    for entry in entries:
        samples = as_float32(decode_file(entry.audio.read_bytes()).samples)
        np.save(out / f"{entry.name}.npy", samples)
        files[entry.name] = (out / f"{entry.name}.npy", entry.text, len(samples) / SAMPLING_RATE)
    long_samples, long_text, silences = build_long_file(entries, minutes)
    np.save(out / "long.npy", long_samples)
    files["long"] = (out / "long.npy", long_text, len(long_samples) / SAMPLING_RATE)
    return files, silences


def worker(decoder: str, asr_model: str) -> None:
    """Serve ``{"path"}`` lines on stdin with one JSON result line each on stdout."""
    import time

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.transcriber import Transcriber

    handler = Transcriber(settings=ModelSettings(asr_model=asr_model, diarization_model=None))
    recognizer = handler.recognizer
    print(json.dumps({"ready": True, "rss_mb": _peak_rss_mb()}), flush=True)
    for line in sys.stdin:
        samples = np.load(json.loads(line)["path"])
        parameters = {"language": "en", "long_form": decoder, "return_timestamps": "segment"}
        started = time.perf_counter()
        if decoder == "sequential":
            raw = recognizer.pipeline(
                {"raw": samples, "sampling_rate": SAMPLING_RATE},
                return_timestamps=True,
                generate_kwargs={"num_beams": 1, "do_sample": False, "language": "en", "task": "transcribe"},
            )
            chunks = [{"text": c["text"], "timestamp": list(c["timestamp"])} for c in raw.get("chunks") or []]
            result = {"text": raw["text"].strip(), "chunks": chunks, "speakers": []}
        else:
            result = handler({"inputs": {"array": samples, "sampling_rate": SAMPLING_RATE}, "parameters": parameters})
        seconds = time.perf_counter() - started
        print(json.dumps({"seconds": seconds, "rss_mb": _peak_rss_mb(), "result": result}), flush=True)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Worker:
    """A benchmark worker process: loads its model once, then answers one JSON line per file."""

    def __init__(self, command: list[str], environment: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=environment)
        self.loaded_rss_mb = self._read()["rss_mb"]

    def run(self, path: Path, **options: Any) -> dict[str, Any]:
        self.process.stdin.write(json.dumps({"path": str(path), **options}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with {self.process.wait()}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def segment_lengths(result: dict[str, Any]) -> list[float]:
    return [chunk["timestamp"][1] - chunk["timestamp"][0] for chunk in result["chunks"] if chunk["timestamp"][1] is not None]


def words_in_silence(result: dict[str, Any], silences: list[tuple[float, float]], normalise: Any) -> int:
    """Words of segments whose middle lies inside an inserted silence (margins excluded)."""
    from speaker_transcripts.evaluation.scoring import words_of

    count = 0
    for chunk in result["chunks"]:
        start, end = chunk["timestamp"]
        middle = (start + (end if end is not None else start)) / 2
        if any(low + SILENCE_MARGIN_S < middle < high - SILENCE_MARGIN_S for low, high in silences):
            count += len(words_of(chunk["text"], normalise))
    return count


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if arguments.worker:
        worker(arguments.worker, arguments.asr_model)
        return 0
    from speaker_transcripts.evaluation.scoring import english_normaliser, word_errors, words_of
    from speaker_transcripts.output.formats import rule_breaks, subtitle_cues

    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs the dev audio (../shared/dev-audio)", file=sys.stderr)
        return 2
    files, silences = benchmark_files(arguments.manifest, arguments.out, arguments.minutes)
    silent_share = sum(high - low for low, high in silences) / files["long"][2]
    print(f"long file: {files['long'][2] / 60:.1f} min, {len(silences)} inserted silences ({silent_share:.0%} of it)")

    workers = {
        decoder: Worker([sys.executable, __file__, "--worker", decoder, "--asr-model", arguments.asr_model])
        for decoder in arguments.decoders
    }
    timings: dict[tuple[str, str], list[float]] = {}
    results: dict[tuple[str, str], dict[str, Any]] = {}
    peaks: dict[str, float] = {}
    try:
        for run in range(arguments.runs):
            for name, (path, _, _) in files.items():
                for decoder, process in workers.items():  # interleaved: each file by all decoders in turn
                    answer = process.run(path)
                    timings.setdefault((decoder, name), []).append(answer["seconds"])
                    results[(decoder, name)] = answer["result"]
                    peaks[decoder] = answer["rss_mb"]
            print(f"run {run + 1}/{arguments.runs} done", file=sys.stderr)
    finally:
        for process in workers.values():
            process.close()

    normalise = english_normaliser()
    report: dict[str, Any] = {"long_minutes": files["long"][2] / 60, "inserted_silence_share": silent_share, "decoders": {}}
    for decoder in arguments.decoders:
        per_file = {}
        short_total = None
        for name, (_, text, duration) in files.items():
            result = results[(decoder, name)]
            counts = word_errors(words_of(text, normalise), words_of(result["text"], normalise))
            if name != "long":
                short_total = counts if short_total is None else short_total + counts
            lengths = segment_lengths(result)
            cues = subtitle_cues(result)
            per_file[name] = {
                "wer": counts.rate,
                "seconds": statistics.median(timings[(decoder, name)]),
                "rtf": statistics.median(timings[(decoder, name)]) / duration,
                "segments": len(lengths),
                "longest_segment_s": max(lengths, default=0.0),
                "median_segment_s": statistics.median(lengths) if lengths else 0.0,
                "srt_cues": len(cues),
                "srt_cues_breaking_rules": len(rule_breaks(cues)),
            }
        per_file["long"]["words_in_inserted_silence"] = words_in_silence(results[(decoder, "long")], silences, normalise)
        report["decoders"][decoder] = {
            "dev_files_wer": short_total.rate if short_total else None,
            "peak_rss_mb": peaks[decoder],
            "loaded_rss_mb": workers[decoder].loaded_rss_mb,
            "files": per_file,
        }
    (arguments.out / "results.json").write_text(json.dumps(report, indent=2))
    _table(report).save(arguments.out)  # printed a row at a time
    return 0


def _table(report: dict[str, Any]) -> Table:
    table = Table.of_headers("long-form", (
        "decoder", "dev WER", "long WER", "long s (RTF)", "peak RSS MB", "longest seg s (dev conv / long)", "median seg s (conv)",
        "SRT cues breaking rules", "words in silence"))
    for decoder, data in report["decoders"].items():
        files = data["files"]
        long = files["long"]
        conversations = [files[name] for name in files if name.startswith("conv")]
        longest_conv = max((item["longest_segment_s"] for item in conversations), default=0.0)
        median_conv = statistics.median([item["median_segment_s"] for item in conversations]) if conversations else 0.0
        breaking = sum(item["srt_cues_breaking_rules"] for item in files.values())
        cues = sum(item["srt_cues"] for item in files.values())
        table.add_cells(
            decoder, f"{data['dev_files_wer']:.1%}", f"{long['wer']:.1%}", f"{long['seconds']:.0f} ({long['rtf']:.3f})",
            f"{data['peak_rss_mb']:.0f}", f"{longest_conv:.1f} / {long['longest_segment_s']:.1f}", f"{median_conv:.1f}",
            f"{breaking}/{cues}", long["words_in_inserted_silence"])
    return table


if __name__ == "__main__":
    sys.exit(main())
