"""Requests per second and latency of the real server, with 1 and N concurrent clients.

    python bench/speed/http_throughput.py --asr-model DIR [--audio FILE] [--requests 40] [--concurrency 1 8] [--out bench-results/http-throughput]

Starts ``uvicorn speaker_transcripts.server.app:app`` in a subprocess with ``ASR_MODEL=DIR`` (OMP_WAIT_POLICY=PASSIVE, so
the client threads don't make the server's spinning OpenMP threads fight them), waits for
``/ready``, then for each concurrency level posts the same audio ``--requests`` times over
``POST /`` (base64 JSON) and reports requests/s and latency percentiles. The server runs one
inference at a time (the models are shared), so more clients add queueing, not throughput: the
point is that throughput holds and nothing fails.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(asr_model: str, port: int, max_queue: int) -> subprocess.Popen:
    env = {**os.environ, "ASR_MODEL": asr_model, "MAX_QUEUE": str(max_queue), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "speaker_transcripts.server.app:app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("the server exited during start-up")
        try:
            httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).raise_for_status()
            return server
        except httpx.HTTPError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit("the server did not become ready in 300 s")


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

    port = free_port()
    server = start_server(arguments.asr_model, port, max_queue=max(arguments.concurrency))
    url = f"http://127.0.0.1:{port}/"
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
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
