"""Live sessions at real-time pace: how soon words and speakers arrive, how right they are, how many sessions fit.

    python bench/live.py --asr-model whisper-base [--sets dev ami quick] [--only trn00 trn01 ...] [--quick-dir DIR]
        [--quick-per-kind 2] [--busy 2] [--sessions 1 2 3] [--no-diarize] [--no-shed] [--lookahead 3] [--speed 1]
        [--clock audio] [--out bench-results/live]

Sets: ``dev`` (the dev conversations), ``ami`` (the 12 AMI excerpts, reported as ``ami-tuning`` trn00-trn05
and ``ami-held-out``), ``quick`` (``bench/quality/quick_conversations.py``'s exchanges). Each file is streamed
into a live session in 100-ms appends at real-time pace, the models loaded once as the server runs them;
``--sessions N`` runs N at once, ``--busy N`` beside N spinning processes. Reported per set beside the file
path: word latency, speaker latency (a word's end to the final segment carrying its speaker), WER,
attribution, DER, speaker counts, CPU and the worst backlog; what each means exactly is in bench/README.md
("live.py"). ``--clock audio`` replays each file 100 ms at a time as fast as the machine goes and times
every event on the audio's clock: the latencies the session's rules allow, without the machine's lag
(the same on a busy machine as on a quiet one; for trying settings).
"""

from __future__ import annotations

import argparse
import json
import os
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


SETS = ("dev", "ami", "quick")
AMI_TUNING = {f"trn{index:02d}" for index in range(6)}  # the AMI excerpts the live settings were tuned on


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--manifest", type=Path, default=DEV_AUDIO / "manifest.json")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--only", nargs="+", help="only the files whose names start with one of these (e.g. trn00 trn01)")
    parser.add_argument("--quick-dir", type=Path, default=Path("bench-results/quick"),
                        help="the quick conversations (bench/quality/quick_conversations.py writes them here when missing)")
    parser.add_argument("--quick-per-kind", type=int, default=2, help="quick conversations of each kind, when they are made")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1], help="sessions at once, one run each")
    parser.add_argument("--no-diarize", dest="diarize", action="store_false")
    parser.add_argument("--no-shed", dest="shed", action="store_false", help="keep every interim decode while behind (the old way)")
    parser.add_argument("--speed", type=float, default=1.0, help="pace over real time (1: real time)")
    parser.add_argument("--lookahead", type=float,
                        help="seconds after a stopped turn its final decode hears while its session is alone "
                             "(LIVE_LOOKAHEAD_S; default: what the server chooses on this machine, live.capacity)")
    parser.add_argument("--clock", choices=("wall", "audio"), default="wall",
                        help="time events by the wall clock (real-time streaming) or by the audio's (a replay without the machine's lag)")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning on a core each while the sessions stream (a busy machine)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/live"))
    return parser.parse_args(argv)


def recordings(arguments: argparse.Namespace) -> dict[str, list[Any]]:
    """The manifest entries of each set asked for (``--only`` applied)."""
    from speaker_transcripts.evaluation.scoring import load_manifest

    manifest = load_manifest(arguments.manifest)
    chosen: dict[str, list[Any]] = {}
    if "dev" in arguments.sets:
        chosen["dev"] = [entry for entry in manifest if entry.kind == "synthetic_conversation" and entry.speaker_texts]
    if "ami" in arguments.sets:  # tuned on trn00-trn05, reported on the rest as held out
        meetings = [entry for entry in manifest if entry.kind == "real_meeting"]
        chosen["ami-tuning"] = [entry for entry in meetings if Path(entry.name).stem in AMI_TUNING]
        chosen["ami-held-out"] = [entry for entry in meetings if Path(entry.name).stem not in AMI_TUNING]
    if "quick" in arguments.sets:
        if not (arguments.quick_dir / "manifest.json").is_file():
            from bench.quality import quick_conversations

            quick_conversations.main(["--shared", str(arguments.manifest.parent), "--out", str(arguments.quick_dir),
                                      "--per-kind", str(arguments.quick_per_kind)])
        chosen["quick"] = load_manifest(arguments.quick_dir / "manifest.json")
    if arguments.only:
        chosen = {name: [entry for entry in entries if Path(entry.name).stem.startswith(tuple(arguments.only))]
                  for name, entries in chosen.items()}
    return {name: entries for name, entries in chosen.items() if entries}


def stream(session: Any, samples: np.ndarray, speed: float, shed: bool = True, alone: Any = lambda: True,
           audio_clock: bool = False) -> dict[str, Any]:
    """Feed ``samples`` at ``speed`` x real time; the session processes what arrived whenever it is free
    (``shed``: fewer interim decodes while it is behind; ``alone()``: no other session streaming now, so
    the lookahead applies; both as the server's route has them). ``audio_clock``: fed one piece at a time
    whatever the pace, each event timed at the audio fed so far, the diarizer's step awaited after each."""
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
            if wait > 0 and not audio_clock:
                time.sleep(wait)
            with lock:
                arrived.append(samples[first : first + step])
        done.set()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    fed = 0
    latencies: list[float] = []  # per word of a delta: delivered minus ended in the audio (session seconds)
    speaker_latencies: list[float] = []  # per word of a final segment, the same
    segments: list[Any] = []
    timeline: list[Any] = []  # the live diarizer's final turns
    if session.diarizer is not None:
        advance = session.diarizer.advance

        def recorded(*args: Any, **kwargs: Any) -> list[Any]:
            made = advance(*args, **kwargs)
            timeline.extend(made)
            return made

        session.diarizer.advance = recorded
    completed: list[str] = []
    deltas: list[str] = []
    backlog_peak = 0.0

    def note(events: list[Any], now: float) -> None:
        for event in events:
            if isinstance(event, TranscriptDelta):
                latencies.extend(now - end for end in event.ends)
                deltas.append(event.delta)
            elif isinstance(event, TranscriptSegment):
                segments.append(event)
                speaker_latencies.extend(now - end for end in event.ends)
            elif isinstance(event, TranscriptCompleted):
                completed.append(event.transcript)

    watch = LagWatch()  # as the server's route: behind past 4 s of lag, and interim decodes shed until caught up
    reports: list[Any] = []
    if audio_clock:
        done.wait()
        for piece in arrived:
            fed += len(piece)
            events = session.append(piece)
            session._diarizer_done(wait=True)  # on the audio's clock the diarizer's step takes no time
            note(events, fed / 16000)
        arrived.clear()
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
    note(session.close(), fed / 16000 if audio_clock else (time.monotonic() - started) * speed)
    return {"latencies": latencies, "speaker_latencies": speaker_latencies, "segments": segments, "timeline": timeline,
            "completed": completed, "deltas": deltas, "backlog_peak_s": backlog_peak,
            "wall_s": time.monotonic() - started, "behind_reports": sum(report.behind for report in reports)}


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs ../shared/dev-audio (the dev conversations)", file=sys.stderr)
        return 2
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.live.capacity import live_capacity
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.transcriber import Transcriber

    sets = recordings(arguments)
    handler = Transcriber(ModelSettings(asr_model=arguments.asr_model,
                                        diarization_model="pyannote-campplus" if arguments.diarize else None))
    entries = [entry for chosen in sets.values() for entry in chosen]
    audio = {entry.audio: as_float32(decode_file(entry.audio.read_bytes()).samples) for entry in entries}
    file_path = file_path_answers(handler, entries, audio, arguments.out / f"file-path-{Path(arguments.asr_model).name}.json")
    fast_encoder = handler.capabilities.fast_encoder
    lookahead = live_capacity(fast_encoder, lookahead_s=arguments.lookahead).lookahead_s
    report: dict[str, Any] = {"asr_model": arguments.asr_model, "diarize": arguments.diarize, "fast_encoder": fast_encoder,
                              "lookahead_s": lookahead, "only": arguments.only, "runs": []}
    import multiprocessing

    from bench.speed.busy_machine import spin

    neighbours = [multiprocessing.Process(target=spin, daemon=True) for _ in range(arguments.busy)]
    for neighbour in neighbours:
        neighbour.start()
    try:
        for count in arguments.sessions:
            for name, chosen in sets.items():
                row = {"set": name, "sessions": count, "files": len(chosen), "busy": arguments.busy, "load_before": os.getloadavg()[0]}
                row.update(run_set(arguments, handler, chosen, audio, file_path, count, lookahead))
                row["load_after"] = os.getloadavg()[0]
                report["runs"].append(row)
                print(json.dumps(row), flush=True)
    finally:
        for neighbour in neighbours:
            neighbour.terminate()
            neighbour.join()
    arguments.out.mkdir(parents=True, exist_ok=True)
    name = (f"live-{arguments.asr_model}{'' if arguments.diarize else '-no-diarize'}{'' if arguments.shed else '-no-shed'}"
            f"{f'-busy{arguments.busy}' if arguments.busy else ''}{'-audio-clock' if arguments.clock == 'audio' else ''}.json")
    (arguments.out / name).write_text(json.dumps(report, indent=2))
    return 0


def file_path_answers(handler: Any, entries: list[Any], audio: dict[Path, np.ndarray], cache: Path) -> dict[Path, Any]:
    """The file path's answer for each entry (the handler on the whole file), kept in ``cache`` for the next
    run: the file path does not change while the live settings are tuned (delete it when it does)."""
    kept = json.loads(cache.read_text()) if cache.is_file() else {}
    answers = {}
    for entry in entries:
        if str(entry.audio) not in kept:
            answer = handler({"inputs": {"array": audio[entry.audio], "sampling_rate": 16000},
                              "parameters": {"language": "en", "return_timestamps": "word"}})
            kept[str(entry.audio)] = {name: answer[name] for name in ("text", "speakers", "diarization")}
        answers[entry.audio] = kept[str(entry.audio)]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(kept))
    return answers


def run_set(arguments: argparse.Namespace, handler: Any, entries: list[Any], audio: dict[Path, np.ndarray],
            file_path: dict[Path, Any], count: int, lookahead: float) -> dict[str, Any]:
    """Stream every entry, ``count`` sessions at once; the set's figures, live beside the file path's."""
    from speaker_transcripts.live.session import LiveConfig, LiveSession

    # every file streamed at least once: groups of ``count`` sessions at once, one group after another
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
                into[index] = stream(session, audio[entry.audio], arguments.speed, shed=arguments.shed, alone=lambda: streaming[0] == 1,
                                     audio_clock=arguments.clock == "audio")
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
    row: dict[str, Any] = {}
    row.update(percentiles("latency", [latency for result in results for latency in result["latencies"]]))
    row.update(percentiles("speaker_latency", [latency for result in results for latency in result["speaker_latencies"]]))
    row.update(_errors_row(chosen, results, file_path))
    row.update({
        "cpu_cores_busy": round(cpu, 2),
        "backlog_peak_s": round(max(result["backlog_peak_s"] for result in results), 2),
        "behind_reports": sum(result["behind_reports"] for result in results),
        "wall_over_audio": round(max(result["wall_s"] * arguments.speed / (len(audio[entry.audio]) / 16000)
                                     for entry, result in zip(chosen, results, strict=True)), 2),
    })
    if arguments.diarize:
        row.update(_attribution_row(chosen, results, file_path))
        row.update(_speakers_row(chosen, results, file_path, audio))
    return row


def percentiles(name: str, values: list[float]) -> dict[str, float | None]:
    """``<name>_p50_s`` and ``<name>_p90_s`` of ``values`` (None when there are none)."""
    return {f"{name}_p50_s": round(statistics.median(values), 2) if values else None,
            f"{name}_p90_s": round(float(np.percentile(values, 90)), 2) if values else None}


def _errors_row(chosen: list[Any], results: list[dict[str, Any]], file_path: dict[Path, Any]) -> dict[str, Any]:
    """WER of the live turns' final text, of their deltas (the interim text) and of the file path, pooled over the entries with text."""
    from speaker_transcripts.evaluation.scoring import english_normaliser, word_errors, words_of

    normalise = english_normaliser()
    pooled: dict[str, Any] = {}
    for entry, result in zip(chosen, results, strict=True):
        if not entry.text:
            continue
        reference = words_of(entry.text, normalise)
        for name, text in (("live_wer", " ".join(result["completed"])), ("delta_wer", " ".join(result["deltas"])),
                           ("file_wer", file_path[entry.audio]["text"])):
            errors = word_errors(reference, words_of(text, normalise))
            pooled[name] = errors if name not in pooled else pooled[name] + errors
    return {name: round(errors.rate, 4) for name, errors in pooled.items()}


def _attribution_row(chosen: list[Any], results: list[dict[str, Any]], file_path: dict[Path, Any]) -> dict[str, Any]:
    """Attribution of the live words and of the file path's, against the reference turns (entries with speaker texts)."""
    from speaker_transcripts.evaluation.scoring import attribution, english_normaliser, words_of

    normalise = english_normaliser()

    def speaker_words(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(word, speaker) for speaker, text in pieces for word in words_of(text, normalise)]

    live_scores, file_scores = [], []
    for entry, result in zip(chosen, results, strict=True):
        if not entry.speaker_texts:
            continue
        reference = entry.reference_speaker_words(normalise)
        live = speaker_words([(segment.speaker, segment.text) for segment in result["segments"]])
        whole = speaker_words([(segment["speaker"], segment["text"]) for segment in file_path[entry.audio]["speakers"]])
        live_scores.append(attribution(reference, live).accuracy)
        file_scores.append(attribution(reference, whole).accuracy)
    if not live_scores:
        return {}
    return {"live_attribution": round(statistics.mean(live_scores), 4), "file_attribution": round(statistics.mean(file_scores), 4)}


def _speakers_row(chosen: list[Any], results: list[dict[str, Any]], file_path: dict[Path, Any], audio: dict[Path, np.ndarray]) -> dict[str, Any]:
    """DER of the live diarizer's timeline and the file path's (entries with RTTM), and the files whose
    speakers are counted right, live and by the file path; one line per file on stderr."""
    from speaker_transcripts.evaluation.scoring import DiarizationTotals
    from speaker_transcripts.pipeline.diarization import Turn

    live_der, file_der = DiarizationTotals(), DiarizationTotals()
    live_right = file_right = live_timeline_right = file_timeline_right = counted = 0
    for entry, result in zip(chosen, results, strict=True):
        if not entry.turns:
            continue
        counted += 1
        reference = len({turn.speaker for turn in entry.turns})
        live_count = len({segment.speaker for segment in result["segments"]})
        file_count = len({segment["speaker"] for segment in file_path[entry.audio]["speakers"]})
        live_right += live_count == reference
        file_right += file_count == reference
        live_timeline = len({turn.speaker for turn in result["timeline"]})
        file_timeline = len({turn["speaker"] for turn in file_path[entry.audio]["diarization"]})
        live_timeline_right += live_timeline == reference
        file_timeline_right += file_timeline == reference
        seconds = len(audio[entry.audio]) / 16000
        live = live_der.add(entry.turns, result["timeline"], seconds)["der"]
        whole = file_der.add(entry.turns, [Turn(turn["speaker"], turn["start"], turn["end"]) for turn in file_path[entry.audio]["diarization"]],
                             seconds)["der"]
        late = percentiles("", result["speaker_latencies"])
        print(f"  {entry.name:22s} speakers live {live_count} file {file_count} (timelines {live_timeline}, {file_timeline}) of {reference}  DER live {live:.3f} file {whole:.3f}  "
              f"speaker latency p50 {late['_p50_s']} p90 {late['_p90_s']} s  worst backlog {result['backlog_peak_s']:.1f} s  labels {sorted({s.speaker for s in result['segments']})}",
              file=sys.stderr, flush=True)
    if not counted:
        return {}
    return {"live_der": round(live_der.summary()["der"], 4), "file_der": round(file_der.summary()["der"], 4),
            "live_count_right": f"{live_right}/{counted}", "file_count_right": f"{file_right}/{counted}",
            "live_timeline_count_right": f"{live_timeline_right}/{counted}", "file_timeline_count_right": f"{file_timeline_right}/{counted}"}


if __name__ == "__main__":
    sys.exit(main())
