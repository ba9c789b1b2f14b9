"""The server's memory with its queue full of the largest uploads the defaults allow.

    .venv/bin/python bench/memory/queue_memory.py [--asr-model whisper-tiny.en] [--clients 17] [--upload-mb 95] \
        [--max-queued-mb 300] [--hold-s 40] [--out bench-results/queue-memory]

Starts ``speaker-transcripts serve`` as a user does, on the documented defaults (``MAX_UPLOAD_MB=100``,
``MAX_QUEUE=16``; ``MAX_QUEUED_MB`` as given, no diarization), its RSS sampled every 50 ms
(``bench/probe.py``'s ``Server``), then sends ``--clients`` concurrent raw WAV uploads of
``--upload-mb`` each (16-bit noise at 16 kHz: 95 MB is 52 min of audio, which keeps the first one
busy), watches for ``--hold-s``, and hangs every client up. Prints how many were admitted and
refused (503 naming ``MAX_QUEUED_MB``), the peak RSS above idle while they were held, and the RSS
once they were gone. Run it with ``--max-queued-mb 100000`` for the count-only queue of before.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for probe.py
from probe import KEY, Server

from bench.results import Table
from tests.audio_files import pcm_wav


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr-model", default="whisper-tiny.en")
    parser.add_argument("--clients", type=int, default=17)
    parser.add_argument("--upload-mb", type=float, default=95.0)
    parser.add_argument("--max-queued-mb", type=float, default=300.0)
    parser.add_argument("--hold-s", type=float, default=40.0)
    parser.add_argument("--out", type=Path, default=Path("bench-results/queue-memory"))
    arguments = parser.parse_args(argv)

    body = noise_wav(int(arguments.upload_mb * 1024 * 1024 / 2))
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    server = Server(arguments.asr_model, port, MAX_UPLOAD_MB="100", MAX_AUDIO_SECONDS=str(3 * 3600), MAX_QUEUE="16",
                    MAX_QUEUED_MB=str(arguments.max_queued_mb), REQUEST_TIMEOUT_S="", MAX_CONNECTIONS="256")
    try:
        time.sleep(2.0)
        idle = server.rss_mb()
        statuses: Counter[str] = Counter()
        errors: list[str] = []
        clients = [httpx.Client(timeout=arguments.hold_s + 120) for _ in range(arguments.clients)]

        def upload(client: httpx.Client) -> None:
            try:
                response = client.post(server.url + "/", content=body, headers={"Authorization": f"Bearer {KEY}", "Content-Type": "audio/wav"})
                statuses[str(response.status_code)] += 1
                if response.status_code == 503:
                    errors.append(response.json()["error"])
            except httpx.HTTPError as error:  # hung up below, on purpose
                statuses[type(error).__name__] += 1

        started = time.monotonic()
        threads = [threading.Thread(target=upload, args=(client,), daemon=True) for client in clients]
        for thread in threads:
            thread.start()
        time.sleep(arguments.hold_s)
        held = server.peak_since(started)
        ready = httpx.get(server.url + "/ready", timeout=30).json()["queue"]
        for client in clients:
            client.close()
        for thread in threads:
            thread.join(timeout=30)
        drained = time.monotonic()
        while httpx.get(server.url + "/ready", timeout=30).json()["queue"]["in_progress_or_waiting"] and time.monotonic() - drained < 120:
            time.sleep(0.5)
        time.sleep(2.0)
        after = server.rss_mb()
    finally:
        server.close()
    table = Table("queue-memory", (("answers", f"answers within {arguments.hold_s:g} s", ""), ("queue", "queue then", ""),
                                   ("idle_mb", "idle RSS, MB", ".0f"), ("held_mb", "peak while held, MB", ".0f"),
                                   ("after_mb", "after all hung up and the queue drained, MB", ".0f"), ("refusal", "a refusal", "")),
                  note=[f"{arguments.clients} uploads of {arguments.upload_mb:g} MB, MAX_QUEUED_MB={arguments.max_queued_mb:g}"])
    table.add(answers=dict(statuses), queue=ready, idle_mb=idle, held_mb=held, after_mb=after, refusal=errors[0] if errors else None)
    table.save(arguments.out)
    return 0


def noise_wav(samples: int) -> bytes:
    """``samples`` of quiet white noise as a 16-bit 16-kHz WAV: the speech gate keeps none of it
    out of the decoder's reach the way silence would, and it compresses nowhere."""
    return pcm_wav(np.random.default_rng(0).normal(0.0, 300 / 32767, samples))


if __name__ == "__main__":
    sys.exit(main())
