"""Live sessions at real-time pace: how soon words arrive, how right they are, how many sessions fit.

    python bench/live.py --asr-model whisper-base [--manifest ../shared/dev-audio/manifest.json] \
        [--sessions 1 2 3] [--no-diarize] [--no-shed] [--lookahead 3] [--speed 1] [--out bench-results/live]

Each dev conversation (manifest entries with RTTM and text) is streamed into a live session
(``live/session.py``, the models loaded once, as the server runs them) in 100-ms appends at
real-time pace by a feeder thread; the session's thread takes whatever audio arrived while it was
busy in one go, as the server's worker does. ``--sessions N`` runs N sessions at once, each on its
own conversation (cycled, in groups of N until every conversation has been streamed), sharing the
models as the server's sessions do.

Reported per run (figures for docs/performance.md and the README):

- word latency: for each final word, the time its delta was delivered minus the time the word
  ended in the audio (its end on the session clock, paced), p50 and p90;
- final WER of the completed turns, pooled, against the reference, and the file path's WER on the
  same audio (the handler on the whole file, same model) for comparison;
- speaker attribution of the live words: the share of reference words (``scoring.attribution``,
  with the reference turns' speakers mapped to the live labels by the best one-to-one overlap)
  given the right speaker, beside the file path's on the same audio;
- CPU: process CPU seconds over wall seconds (of 2 cores here: 2.0 is everything), and whether
  the sessions kept up: the backlog (audio received, not yet processed) at the end of each
  session, and the lag of the last word.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEV_AUDIO = ROOT.parent / "shared" / "dev-audio"
PIECE_S = 0.1


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--manifest", type=Path, default=DEV_AUDIO / "manifest.json")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1], help="sessions at once, one run each")
    parser.add_argument("--no-diarize", dest="diarize", action="store_false")
    parser.add_argument("--no-shed", dest="shed", action="store_false", help="keep every interim decode while behind (the old way)")
    parser.add_argument("--speed", type=float, default=1.0, help="pace over real time (1: real time)")
    parser.add_argument("--lookahead", type=float,
                        help="seconds after a stopped turn its final decode hears while its session is alone "
                             "(LIVE_LOOKAHEAD_S; default: what the server chooses on this machine, live.capacity)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/live"))
    return parser.parse_args(argv)


def stream(session: Any, samples: np.ndarray, speed: float, shed: bool = True, alone: Any = lambda: True) -> dict[str, Any]:
    """Feed ``samples`` at ``speed`` x real time; the session processes what arrived whenever it is free
    (``shed``: fewer interim decodes while it is behind; ``alone()``: no other session streaming now, so
    the lookahead applies; both as the server's route has them)."""
    from speaker_transcripts.live.backlog import LagWatch
    from speaker_transcripts.live.events import TranscriptCompleted, TranscriptDelta, TranscriptSegment

    arrived: list[np.ndarray] = []
    lock = threading.Lock()
    done = threading.Event()
    started = time.monotonic()

    def feed() -> None:
        step = int(PIECE_S * 16000)
        for index, first in enumerate(range(0, len(samples), step)):
            wait = started + (index + 1) * PIECE_S / speed - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            with lock:
                arrived.append(samples[first : first + step])
        done.set()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    fed = 0
    latencies: list[float] = []  # per final word: delivered minus ended in the audio (session seconds)
    segments: list[Any] = []
    completed: list[str] = []
    backlog_peak = 0.0

    def note(events: list[Any], now: float) -> None:
        for event in events:
            if isinstance(event, TranscriptDelta):
                latencies.extend(now - end for end in event.ends)
            elif isinstance(event, TranscriptSegment):
                segments.append(event)
            elif isinstance(event, TranscriptCompleted):
                completed.append(event.transcript)

    watch = LagWatch()  # as the server's route: behind past 4 s of lag, and interim decodes shed until caught up
    reports: list[Any] = []
    while not (done.is_set() and not arrived):
        with lock:
            batch, arrived[:] = list(arrived), []
        if not batch:
            time.sleep(0.01)
            continue
        if (report := watch.observe((time.monotonic() - started) * speed - fed / 16000)) is not None:
            reports.append(report)
        session.shedding = shed and watch.shedding
        session.alone = alone()
        chunk = np.concatenate(batch)
        # the audio received and not yet processed, the pile about to be taken included (the session's own lag)
        backlog_peak = max(backlog_peak, (time.monotonic() - started) * speed - fed / 16000)
        fed += len(chunk)
        events = session.append(chunk)
        note(events, (time.monotonic() - started) * speed)
    note(session.close(), (time.monotonic() - started) * speed)
    return {"latencies": latencies, "segments": segments, "completed": completed, "backlog_peak_s": backlog_peak,
            "wall_s": time.monotonic() - started, "behind_reports": sum(report.behind for report in reports)}


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs ../shared/dev-audio (the dev conversations)", file=sys.stderr)
        return 2
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import (
        attribution,
        english_normaliser,
        load_manifest,
        word_errors,
        words_of,
    )
    from speaker_transcripts.live.capacity import live_capacity
    from speaker_transcripts.live.session import LiveConfig, LiveSession
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.transcriber import Transcriber

    entries = [entry for entry in load_manifest(arguments.manifest) if entry.kind == "synthetic_conversation" and entry.speaker_texts]
    handler = Transcriber(ModelSettings(asr_model=arguments.asr_model,
                                        diarization_model="pyannote-campplus" if arguments.diarize else None))
    normalise = english_normaliser()
    audio = {entry.name: as_float32(decode_file(entry.audio.read_bytes()).samples) for entry in entries}
    file_path = {entry.name: handler({"inputs": {"array": audio[entry.name], "sampling_rate": 16000},
                                      "parameters": {"language": "en", "return_timestamps": "word"}}) for entry in entries}
    fast_encoder = handler.capabilities.fast_encoder
    lookahead = live_capacity(fast_encoder, lookahead_s=arguments.lookahead).lookahead_s
    report: dict[str, Any] = {"asr_model": arguments.asr_model, "diarize": arguments.diarize, "fast_encoder": fast_encoder,
                              "lookahead_s": lookahead, "runs": []}
    for count in arguments.sessions:
        # every conversation streamed at least once: groups of ``count`` sessions at once, one group after another
        groups = [[entries[(first + index) % len(entries)] for index in range(count)] for first in range(0, max(len(entries), count), count)]
        chosen: list[Any] = []
        results: list[dict[str, Any]] = []
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        wall_before = time.monotonic()
        for group in groups:
            group_results: list[dict[str, Any]] = [{} for _ in group]
            streaming = [len(group)]  # sessions of the group not finished yet
            finishing = threading.Lock()

            def run(index: int, entry: Any, into: list[dict[str, Any]], streaming: list[int] = streaming, finishing: Any = finishing) -> None:
                session = LiveSession(handler, LiveConfig(language="en", diarize=arguments.diarize, lookahead_s=lookahead))
                try:
                    into[index] = stream(session, audio[entry.name], arguments.speed, shed=arguments.shed, alone=lambda: streaming[0] == 1)
                finally:
                    with finishing:
                        streaming[0] -= 1

            threads = [threading.Thread(target=run, args=(index, entry, group_results)) for index, entry in enumerate(group)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            chosen += group
            results += group_results
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime) / (time.monotonic() - wall_before)
        latencies = [latency for result in results for latency in result["latencies"]]
        live_errors = file_errors = None
        for entry, result in zip(chosen, results, strict=True):
            reference = words_of(entry.text, normalise)
            live = word_errors(reference, words_of(" ".join(result["completed"]), normalise))
            whole = word_errors(reference, words_of(file_path[entry.name]["text"], normalise))
            live_errors = live if live_errors is None else live_errors + live
            file_errors = whole if file_errors is None else file_errors + whole
        row = {
            "sessions": count,
            "latency_p50_s": round(statistics.median(latencies), 2) if latencies else None,
            "latency_p90_s": round(float(np.percentile(latencies, 90)), 2) if latencies else None,
            "live_wer": round(live_errors.rate, 4),
            "file_wer": round(file_errors.rate, 4),
            "cpu_cores_busy": round(cpu, 2),
            "backlog_peak_s": round(max(result["backlog_peak_s"] for result in results), 2),
            "behind_reports": sum(result["behind_reports"] for result in results),
            "wall_over_audio": round(max(result["wall_s"] * arguments.speed / (len(audio[entry.name]) / 16000)
                                         for entry, result in zip(chosen, results, strict=True)), 2),
        }
        if arguments.diarize:
            row.update(_attribution_row(chosen, results, file_path, normalise, attribution))
        report["runs"].append(row)
        print(json.dumps(row), flush=True)
    arguments.out.mkdir(parents=True, exist_ok=True)
    name = f"live-{arguments.asr_model}{'' if arguments.diarize else '-no-diarize'}{'' if arguments.shed else '-no-shed'}.json"
    (arguments.out / name).write_text(json.dumps(report, indent=2))
    return 0


def _attribution_row(chosen: list[Any], results: list[dict[str, Any]], file_path: dict[str, Any], normalise: Any, attribution: Any) -> dict[str, Any]:
    """Attribution of the live words and of the file path's, against the reference turns."""
    from speaker_transcripts.evaluation.scoring import words_of

    def speaker_words(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(word, speaker) for speaker, text in pieces for word in words_of(text, normalise)]

    live_scores, file_scores = [], []
    for entry, result in zip(chosen, results, strict=True):
        reference = entry.reference_speaker_words(normalise)
        live = speaker_words([(segment.speaker, segment.text) for segment in result["segments"]])
        whole = speaker_words([(segment["speaker"], segment["text"]) for segment in file_path[entry.name]["speakers"]])
        live_scores.append(attribution(reference, live).accuracy)
        file_scores.append(attribution(reference, whole).accuracy)
    return {"live_attribution": round(statistics.mean(live_scores), 4), "file_attribution": round(statistics.mean(file_scores), 4)}


if __name__ == "__main__":
    sys.exit(main())
