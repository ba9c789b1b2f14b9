"""Requests per second and latency of the real server, with 1 and N concurrent clients.

    python bench/speed/http_throughput.py --asr-model DIR [--audio FILE] [--requests 40] [--concurrency 1 8] [--out bench-results/http-throughput]

Starts ``speaker-transcripts serve`` with ``ASR_MODEL=DIR`` as the probe does (``bench/probes/server.py``;
the package sets OMP_WAIT_POLICY=PASSIVE, so the client threads don't make the server's OpenMP threads
fight them), then for each concurrency level posts the same audio ``--requests`` times over ``POST /``
(base64 JSON) and reports requests/s and latency percentiles. The server runs one
inference at a time (the models are shared), so more clients add queueing, not throughput: the
point is that throughput holds and nothing fails.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.probes.server import Server
from bench.results import Table


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_level(url: str, body: dict, requests: int, concurrency: int) -> dict[str, float]:
    def one(_: int) -> tuple[int, float]:
        started = time.perf_counter()
        response = httpx.post(url, json=body, timeout=600)
        return response.status_code, time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        outcomes = list(pool.map(one, range(requests)))
    wall = time.perf_counter() - started
    latencies = sorted(seconds for status, seconds in outcomes if status == 200)
    failures = sum(status != 200 for status, _ in outcomes)
    return {
        "concurrency": concurrency,
        "requests": requests,
        "failed": failures,
        "requests_per_s": len(latencies) / wall,
        "median_s": statistics.median(latencies),
        "p90_s": latencies[int(0.9 * (len(latencies) - 1))],
        "max_s": latencies[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", required=True)
    parser.add_argument("--audio", type=Path, default=ROOT / "tests" / "data" / "goforward.wav")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--out", type=Path, default=Path("bench-results/http-throughput"))
    arguments = parser.parse_args()

    # ``speaker-transcripts serve`` as the probe runs it, on the documented defaults but the queue (no key, speakers on)
    server = Server(arguments.asr_model, free_port(), API_KEY="", DIARIZATION_MODEL="", MAX_UPLOAD_MB="", MAX_AUDIO_SECONDS="",
                    REQUEST_TIMEOUT_S="", MAX_CONNECTIONS="", WRITE_TIMEOUT_S="", MAX_QUEUE=str(max(arguments.concurrency)))
    url = server.url + "/"
    body = {"inputs": base64.b64encode(arguments.audio.read_bytes()).decode(), "parameters": {"language": "en"}}
    try:
        httpx.post(url, json=body, timeout=600).raise_for_status()  # warm-up
        table = Table("http-throughput", (("concurrency", "clients", ""), ("requests", "requests", ""), ("failed", "failed", ""),
                                          ("requests_per_s", "req/s", ".2f"), ("median_s", "median s", ".3f"), ("p90_s", "p90 s", ".3f"),
                                          ("max_s", "max s", ".3f")),
                      note=[f"model {arguments.asr_model}, audio {arguments.audio.name}, {os.cpu_count()} CPUs"])
        for concurrency in arguments.concurrency:
            table.add(**run_level(url, body, arguments.requests, concurrency))
        table.save(arguments.out)
    finally:
        server.close()


if __name__ == "__main__":
    main()
