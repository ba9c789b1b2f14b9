"""An outside probe of every surface a user or an attacker reaches: random variants of every kind of
bad or heavy input against the product run as a user runs it (``speaker-transcripts serve`` in a
subprocess with its memory watched, the CLI's commands), a module per surface in ``bench/probes/``.

    python bench/probe.py [--surfaces http connections tls cross_site speakers memory model_cache batch live voice_library]
                          [--asr-model whisper-tiny.en] [--variants 8] [--seed 0] [--batch-files 1000] [--tls-connections 3000]
                          [--out bench-results/probe]

Each surface draws fresh random sizes, positions and values every run, never the test suite's inputs;
what each one sends is listed in bench/README.md ("Probes"). Prints a table per class (each saved to ``--out``
as Markdown and JSON, ``bench/results.py``, with the lines and failures in ``probe.json``); exits 1 on any
500, a request that got no answer, a lock-out, garbage served from a damaged cache, or a class that
does not hold (each printed as ``FAILURE:``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from probes import batch, connections, http_requests, live, memory, model_cache, tls, voice_library
from probes.server import KEY, MAX_CONNECTIONS, Server

from bench.results import Table
from tests.audio_files import pcm_wav

SURFACES = ("http", "connections", "tls", "cross_site", "speakers", "memory", "model_cache", "batch", "live", "voice_library")


class Report:
    """The tables the probe prints and the failures it saw, in the order the classes ran."""

    def __init__(self) -> None:
        self.tables: list[Table] = []
        self.lines: list[str] = []
        self.failures: list[str] = []

    def table(self, title: str, columns: tuple[str, ...], rows: list[tuple], failures: list[str] = ()) -> None:
        name = re.sub(r"[^a-z0-9]+", "-", title.lower().split(" (")[0]).strip("-")
        table = Table.of_headers(name, columns, title=title)
        table.rows = [dict(zip(columns, row, strict=True)) for row in rows]
        self.tables.append(table)
        self.failures += failures

    def print(self) -> None:
        for line in self.lines:
            print(line)
        for table in self.tables:
            print(f"\n{table.markdown()}")
        for failure in self.failures:
            print("FAILURE:", failure)

    def save(self, out: Path) -> None:
        for table in self.tables:
            table.save(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "probe.json").write_text(json.dumps({"lines": self.lines, "failures": self.failures,
                                                    "tables": [table.name for table in self.tables]}, indent=2) + "\n")


def stage(name: str) -> None:
    print(f"stage: {name}", flush=True)


def probe_http_and_connections(arguments: argparse.Namespace, rng: random.Random, speech: np.ndarray, surfaces: set[str], report: Report) -> None:
    """The ``http`` and ``connections`` surfaces, on one server (README defaults tightened: see the module doc)."""
    server = Server(arguments.asr_model, arguments.port)
    try:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
        client.post("/", content=pcm_wav(speech[:32000]), headers={"Content-Type": "audio/wav"})  # lazy init outside the peaks
        idle = server.rss_mb()
        report.lines.append(f"idle RSS {idle:.0f} MB")
        if "http" in surfaces:
            stage("bad requests")
            statuses: dict[str, Counter] = {}
            for _ in range(arguments.variants):
                for kind, request in http_requests.bad_requests(rng, speech):
                    try:
                        status = client.post(**request).status_code
                    except httpx.HTTPError as error:
                        status, _ = 0, report.failures.append(f"{kind}: no answer ({type(error).__name__})")
                    statuses.setdefault(kind, Counter())[status] += 1
                    if status >= 500 or status == 0:
                        report.failures.append(f"{kind}: {status}")
            report.table("bad requests", ("kind", "answers"),
                         [(kind, ", ".join(f"{status} x{count}" for status, count in sorted(counter.items()))) for kind, counter in statuses.items()])
            stage("heaviest allowed requests")
            heavy = []
            for name, seconds, parameters in http_requests.HEAVY:
                audio = pcm_wav(np.resize(speech, int(seconds * 16000)))
                started = time.monotonic()
                answer = client.post("/", content=audio, params={"language": "en", **parameters}, headers={"Content-Type": "audio/wav"})
                heavy.append((name, round(server.peak_since(started) - idle), f"{time.monotonic() - started:.1f}", answer.status_code))
                if answer.status_code not in (200, 504):  # 504: REQUEST_TIMEOUT_S=60 stopped it, as documented
                    report.failures.append(f"{name}: {answer.status_code}")
            report.table("heaviest allowed request", ("request", "peak RSS above idle, MB", "s", "status"), heavy)
            stage("decoder bombs")
            bombs = []
            for kind, data in http_requests.decoder_bombs(rng, speech):
                started = time.monotonic()
                answer = client.post("/", content=data, params={"language": "en"}, headers={"Content-Type": "audio/wav"})
                bombs.append((kind, len(data), answer.status_code, round(server.peak_since(started) - idle)))
                if answer.status_code >= 500:
                    report.failures.append(f"{kind}: {answer.status_code}")
            report.table("decoder bombs", ("bomb", "bytes", "status", "peak RSS above idle, MB"), bombs)
            stage("answers that amplify the request")
            rows, found = http_requests.amplifying_errors(server.url, KEY, rng, server, max_upload_mb=5)
            report.table("amplifying errors", ("kind", "body MB", "status", "answer kB", "s", "slowest /health s", "peak RSS above before, MB"),
                         rows, found)
            stage("client text in headers")
            rows, found = http_requests.client_text_in_headers(server.url, KEY, rng, pcm_wav(speech[:32000]))
            report.table("`model` field", ("what", "status", "header injected"), rows, found)
        if "connections" in surfaces:
            stage("slow clients")
            slow = connections.slow_clients(server.url, 10)
            report.lines.append(f"slow clients (10 slowloris, 10 stalled bodies): {dict(Counter(slow))}")
            # 408: the deadline; 503: a stalled upload beyond what the queue admits is refused before its body is read
            report.failures += [f"a slow client got {status}" for status in slow if status not in (408, 503)]
            stage("mass hang-up")
            recovery = connections.mass_hang_up(server.url, pcm_wav(np.resize(speech, 60 * 16000)), pcm_wav(speech[:32000]), 20)
            report.lines.append(f"20 clients hanging up on 60-s requests: good request answered {recovery:.1f} s after the last; "
                                f"/health {client.get('/health').status_code}")
            stage("lock-out")
            slowest_health, still_connected = connections.lock_out(server.url, rng)
            report.lines.append(f"lock-out: {MAX_CONNECTIONS} connections dripping unread bodies for 20 s; slowest /health "
                                f"{slowest_health:.2f} s; {still_connected} still connected at the end")
            if slowest_health > 5 or still_connected:
                report.failures.append(f"lock-out: slowest /health {slowest_health:.1f} s, {still_connected} attackers still connected")
            stage("oversized heads")
            heads = connections.oversized_heads(server.url, rng, server)
            report.table("oversized head", ("head", "status", "peak RSS above idle, MB"), [(what, status, round(peak)) for what, status, peak in heads],
                         [f"{what}: {status}" for what, status, _ in heads if status not in (413, 431)])
        report.lines.append(f"peak RSS of the first server: {max(rss for _, rss in server.samples):.0f} MB "
                            f"(median {statistics.median(rss for _, rss in server.samples):.0f})")
    finally:
        server.close()


def probe_speakers(arguments: argparse.Namespace, rng: random.Random, speech: np.ndarray, report: Report) -> None:
    stage("long speaker names in subtitles, mass hang-up with diarization")
    diarizing = Server(arguments.asr_model, arguments.port, DIARIZATION_MODEL="pyannote-campplus", REQUEST_TIMEOUT_S="30")
    try:
        enrolment = (ROOT / "samples" / "enrolment" / "reader-b.wav").read_bytes()
        rows, found = http_requests.long_names_in_subtitles(diarizing.url, KEY, rng, pcm_wav(speech), enrolment)
        report.table("known speaker's name in subtitles", ("characters", "words", "words split in SRT cues"), rows, found)
        recovery = connections.mass_hang_up(diarizing.url, pcm_wav(np.resize(speech, 60 * 16000)), pcm_wav(speech[:32000]), 20)
        report.lines.append(f"20 hang-ups on a diarizing server (REQUEST_TIMEOUT_S=30): good request answered {recovery:.1f} s after the last")
    finally:
        diarizing.close()


def probe_live(arguments: argparse.Namespace, rng: random.Random, speech: np.ndarray, report: Report) -> None:
    idle_timeout_s = 5.0
    server = Server(arguments.asr_model, arguments.port, LIVE_IDLE_TIMEOUT_S=str(idle_timeout_s), DIARIZATION_MODEL="pyannote-campplus")
    try:
        stage("live: pending-event floods")
        clip = (ROOT / "samples" / "enrolment" / "reader-b.wav").read_bytes()
        rows, found = live.pending_event_floods(server, rng, clip)
        report.table("live: events that are not audio, in a loop for 20 s", ("flood", "frames sent", "peak RSS above idle, MB",
                                                                             "RSS above idle 5 s after the client left, MB"), rows, found)
        stage("live: a fast client that answers pings")
        rows, found = live.fast_client_answering_pings(server, speech)
        report.table("live: a fast client", ("client", "outcome"), rows, found)
        stage("live: frames without audio")
        rows, found = live.busy_without_audio(server, idle_timeout_s)
        report.table("live: activity without audio", ("client", "outcome"), rows, found)
        stage("live: malformed events")
        rows, found = live.malformed_events(server, rng)
        report.table("live: malformed events", ("event", "error codes", "session went on"), rows, found)
    finally:
        server.close()


def probe_tls_and_cross_site(arguments: argparse.Namespace, rng: random.Random, surfaces: set[str], report: Report) -> None:
    """The ``tls`` and ``cross_site`` surfaces, on one keyless HTTPS server."""
    header_timeout_s = 5.0
    with tempfile.TemporaryDirectory() as folder:
        server = Server(arguments.asr_model, arguments.port, tls=tls.certificate(Path(folder)), API_KEY="",
                        HEADER_TIMEOUT_S=str(header_timeout_s))
        try:
            if "tls" in surfaces:
                stage("TLS handshake floods")
                rows, found = tls.handshake_floods(server, rng, 5, arguments.tls_connections, header_timeout_s)
                report.table("TLS handshakes that never finish", ("flood", "connections", "descriptors held at most",
                                                                  "RSS after, MB", "above idle, MB", "/health during"), rows, found)
            if "cross_site" in surfaces:
                stage("requests from other origins")
                rows, found = tls.cross_site(server, rng)
                report.table("another origin's page, no API_KEY", ("request", "status"), rows, found)
        finally:
            server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--surfaces", nargs="+", choices=SURFACES, default=list(SURFACES))
    parser.add_argument("--asr-model", default="whisper-tiny.en")
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--tls-connections", type=int, default=3000, help="connections in each TLS handshake flood")
    parser.add_argument("--batch-files", type=int, default=1000, help="clips in the killed-and-resumed batch job")
    parser.add_argument("--out", type=Path, default=Path("bench-results/probe"))
    arguments = parser.parse_args(argv)
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    surfaces = set(arguments.surfaces)
    rng = random.Random(arguments.seed)
    speech = as_float32(decode_file((ROOT / "samples" / "two-readers.wav").read_bytes()).samples)
    report = Report()
    if surfaces & {"http", "connections"}:
        probe_http_and_connections(arguments, rng, speech, surfaces, report)
    if surfaces & {"tls", "cross_site"}:
        probe_tls_and_cross_site(arguments, rng, surfaces, report)
    if "speakers" in surfaces:
        probe_speakers(arguments, rng, speech, report)
    if "memory" in surfaces:
        stage("memory on the documented defaults")
        rows, found, bounds = memory.defaults_memory(lambda **overrides: Server(arguments.asr_model, arguments.port, **overrides), KEY, speech, rng)
        report.table(f"documented defaults (bounds derived from the settings: {bounds})", ("input", "status", "peak RSS above idle, MB",
                                                                                           "slowest /health s"), rows, found)
    if "model_cache" in surfaces:
        stage("damaged cache")
        cache = model_cache.damaged_cache(arguments.asr_model, arguments.port, speech)
        found = []
        if not cache[0][1].startswith("exit ") or cache[0][1].startswith("exit 0") or "damaged" not in cache[0][1]:
            found.append(f"damaged cache, index unreachable: {cache[0][1]}")
        if "go forward" not in cache[1][1].lower():
            found.append(f"damaged cache, index reachable: {cache[1][1]}")
        report.table("damaged cache", ("case", "outcome"), cache, found)
    if "batch" in surfaces:
        stage("a batch job over an odd corpus")
        rows, found = batch.odd_corpus(arguments.asr_model, rng, speech)
        report.table("batch over an odd corpus", ("what", "outcome"), rows, found)
        stage(f"a linking batch job of {arguments.batch_files} files, killed and resumed")
        rows, found = batch.killed_and_resumed(arguments.asr_model, rng, arguments.batch_files)
        report.table("batch killed with SIGKILL and resumed", ("what", "outcome"), rows, found)
    if "live" in surfaces:
        probe_live(arguments, rng, speech, report)
    if "voice_library" in surfaces:
        stage("the voice library")
        rows, found = voice_library.voice_library(rng)
        report.table("speakers add", ("given", "exit", "last line", "s", "peak RSS, MB"), rows, found)
    report.print()
    report.save(arguments.out)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
