"""Slow and stalled clients against a real Uvicorn server with the connection guard: headers
that trickle in, bodies that stall or drip, more connections than the cap, and the ordinary
slow-but-steady client that must still be served."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest
from servers import serving

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.server.app import create_app

LIMITS = ServerSettings(header_timeout_s=1.0, body_idle_timeout_s=1.0, body_timeout_s=3.0, max_connections=4)


@pytest.fixture(scope="module")
def guarded_url(served_handler) -> Iterator[str]:
    with serving(create_app(lambda: served_handler, LIMITS), LIMITS) as base_url:
        yield base_url


@contextmanager
def raw_connection(base_url: str) -> Iterator[socket.socket]:
    host, port = base_url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=10)
    try:
        yield connection
    finally:
        connection.close()


def answer_of(connection: socket.socket) -> tuple[int, str, float]:
    """The status line's code, the whole answer up to the server's close, and when it came."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return int(received.split(b" ", 2)[1]), received.decode(errors="replace"), time.monotonic()


def test_headers_trickling_in_get_408_at_the_deadline(guarded_url):
    with raw_connection(guarded_url) as connection:
        started = time.monotonic()
        connection.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")
        for line in range(3):  # a header line every 0.4 s: each keeps the socket busy, none finishes
            time.sleep(0.4)
            try:
                connection.sendall(f"X-Slow-{line}: 1\r\n".encode())
            except OSError:
                break
        status, text, ended = answer_of(connection)
    assert status == 408 and "HEADER_TIMEOUT_S" in text
    assert 0.9 < ended - started < 3.0


def test_a_silent_connection_is_closed_at_the_header_deadline(guarded_url):
    with raw_connection(guarded_url) as connection:
        started = time.monotonic()
        status, _, ended = answer_of(connection)
    assert status == 408 and ended - started < 3.0


@pytest.mark.parametrize("drip_s", [None, 0.5], ids=["stalled", "dripping past the total"])
def test_a_stalled_or_endless_body_gets_408_and_the_server_keeps_serving(guarded_url, drip_s):
    with raw_connection(guarded_url) as connection:
        started = time.monotonic()
        connection.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
        try:
            while drip_s is not None and time.monotonic() - started < 5:
                time.sleep(drip_s)
                connection.sendall(b" ")
        except OSError:
            pass  # closed by the server after its 408
        status, text, ended = answer_of(connection)
    assert status == 408 and "BODY_" in text
    assert ended - started < (2.5 if drip_s is None else 4.5)
    assert httpx.get(f"{guarded_url}/health", timeout=10).status_code == 200


def test_a_slow_but_steady_body_is_served(guarded_url):
    body = json.dumps({"inputs": "not base64 audio!"}).encode()

    def steady() -> Iterator[bytes]:
        for start in range(0, len(body), 8):
            time.sleep(0.2)  # well inside the idle timeout, 0.2 s x 4 chunks inside the total
            yield body[start : start + 8]

    answer = httpx.post(guarded_url, content=steady(), headers={"Content-Type": "application/json"}, timeout=10)
    assert answer.status_code == 400  # read to the end and judged on what it says, not timed out


def test_connections_beyond_the_cap_get_503_and_the_server_recovers(guarded_url):
    with ExitStack() as stack:
        idle = [stack.enter_context(raw_connection(guarded_url)) for _ in range(LIMITS.max_connections)]
        time.sleep(0.2)
        with raw_connection(guarded_url) as extra:
            started = time.monotonic()
            status, text, ended = answer_of(extra)
        assert status == 503 and "too many open connections" in text and ended - started < 0.5
        assert len(idle) == LIMITS.max_connections
    time.sleep(0.2)
    assert httpx.get(f"{guarded_url}/health", timeout=10).status_code == 200


def test_keep_alive_connections_serve_one_request_after_another(guarded_url):
    with httpx.Client(base_url=guarded_url, timeout=10) as client:
        for _ in range(3):
            assert client.get("/health").status_code == 200
            time.sleep(0.6)  # under the keep-alive timeout; the header deadline must not fire in between
