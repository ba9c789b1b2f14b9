"""Connections: slowloris heads and stalled bodies, clients hanging up en masse, connections that
drip bodies no route reads (the lock-out), request heads of any size."""

from __future__ import annotations

import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from probes.server import KEY, MAX_CONNECTIONS, HealthWatch, Server


def slow_clients(url: str, count: int) -> list[int]:
    """``count`` slowloris connections and ``count`` stalled bodies: the status each one got."""
    host, port = url.removeprefix("http://").split(":")

    def trickle(stalled_body: bool) -> int:
        with socket.create_connection((host, int(port)), timeout=120) as connection:
            if stalled_body:
                connection.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                                   "Content-Type: application/json\r\nContent-Length: 90000\r\n\r\n{".encode())
            else:
                connection.sendall(b"POST / HTTP/1.1\r\n")
                try:
                    for line in range(40):
                        time.sleep(1)
                        connection.sendall(f"X-{line}: 1\r\n".encode())
                except OSError:
                    pass
            answer = b""
            try:
                while chunk := connection.recv(65536):
                    answer += chunk
            except ConnectionResetError:  # closed with our unread bytes still queued: the answer may have come first
                pass
            return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0

    with ThreadPoolExecutor(2 * count) as pool:
        return list(pool.map(trickle, [False] * count + [True] * count))


def mass_hang_up(url: str, speech_wav: bytes, good_wav: bytes, clients: int) -> float:
    """Seconds from the last of ``clients`` hang-ups (each sending ``speech_wav``) until a good
    request (``good_wav``) is answered 200."""

    def hang_up(_: int) -> None:
        try:
            httpx.post(url + "/", content=speech_wav, headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {KEY}"},
                       params={"language": "en"}, timeout=0.5)
        except httpx.HTTPError:
            pass

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(hang_up, range(clients)))
    gone = time.monotonic()
    while True:
        answer = httpx.post(url + "/", content=good_wav, params={"language": "en"},
                            headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {KEY}"}, timeout=120)
        if answer.status_code == 200:
            return time.monotonic() - gone
        time.sleep(0.2)


def lock_out(url: str, rng: random.Random) -> tuple[float, int]:
    """``MAX_CONNECTIONS`` clients each send a random request whose body no route reads, then drip
    a byte every 0.5 s for 20 s. Returns the slowest ``/health`` answer seen meanwhile (seconds;
    inf when one got no 200) and how many attackers were still connected at the end."""
    host, port = url.removeprefix("http://").split(":")
    heads = [
        b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\nx" % rng.randint(2, 10**6),
        b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx" % rng.randint(10**6, 10**12),
        b"PUT /ready HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx" % rng.randint(10**3, 10**9),
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx" % rng.randint(10**3, 10**6),  # no key: 401
        b"DELETE /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\nx",
    ]
    stop = threading.Event()

    def attack(_: int) -> bool:
        with socket.create_connection((host, int(port)), timeout=1) as connection:
            connection.sendall(rng.choice(heads))
            while not stop.wait(0.5):
                try:
                    connection.sendall(b"x")
                    connection.recv(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    pass
                except OSError:
                    return False  # closed by the server
            return True

    with ThreadPoolExecutor(MAX_CONNECTIONS) as pool:
        attackers = [pool.submit(attack, index) for index in range(MAX_CONNECTIONS)]
        with HealthWatch(url) as watch:
            time.sleep(20)
        stop.set()
        return watch.slowest, sum(attacker.result() for attacker in attackers)


def oversized_heads(url: str, rng: random.Random, server: Server) -> list[tuple[str, int, float]]:
    """Request lines and headers of random sizes from 40 kB to 64 MB: (what, status, peak RSS above before)."""
    host, port = url.removeprefix("http://").split(":")
    results = []
    for where in ("URL", "header", "many headers"):
        size = rng.choice([40_000, 1_000_000, 64_000_000])
        if where == "URL":
            head = b"GET /" + b"a" * size
        elif where == "header":
            head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * size
        else:
            head = b"GET / HTTP/1.1\r\n" + b"X-H: v\r\n" * (size // 8)
        started = time.monotonic()
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            try:
                connection.sendall(head)
            except OSError:
                pass  # refused before we finished sending
            answer = b""
            try:
                while chunk := connection.recv(65536):
                    answer += chunk
            except OSError:
                pass
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
        results.append((f"{where}, {size / 1e6:g} MB", status, server.peak_since(started) - server.rss_mb()))
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: audio/wav\r\n"
                           f"Content-Length: {rng.randint(6, 900) * 10**6}\r\nExpect: 100-continue\r\n\r\n".encode())
        first = connection.recv(65536)
    results.append(("Expect: 100-continue over the limit", int(first.split(b" ", 2)[1]), 0.0))
    return results
