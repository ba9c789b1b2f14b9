"""Slow and stalled clients against a real Uvicorn server with the connection guard: headers
that trickle in, bodies that stall or drip, more connections than the cap, and the ordinary
slow-but-steady client that must still be served."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest
from servers import serving

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.server import connection_guard
from speaker_transcripts.server.app import create_app

LIMITS = ServerSettings(header_timeout_s=1.0, body_idle_timeout_s=1.0, body_timeout_s=3.0, max_connections=4, write_timeout_s=1.0)
# The cap's own server: connections that have sent nothing are held far longer than any test takes,
# so a busy machine cannot close them (at the 1-s header deadline) before the extra one arrives.
CAPPED = ServerSettings(header_timeout_s=300.0, max_connections=4)
GUARD_S = 60.0  # failure guards only: how long a test waits for something that happens in about a second


@pytest.fixture(scope="module")
def guarded_url(served_handler) -> Iterator[str]:
    with serving(create_app(lambda: served_handler, LIMITS), LIMITS) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def capped_url(served_handler) -> Iterator[str]:
    with serving(create_app(lambda: served_handler, CAPPED), CAPPED) as base_url:
        yield base_url


@contextmanager
def raw_connection(base_url: str) -> Iterator[socket.socket]:
    host, port = base_url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=GUARD_S)
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
    assert ended - started > 0.9  # not before the deadline (it comes at all, or the read above fails)


def test_a_silent_connection_is_closed_at_the_header_deadline(guarded_url):
    with raw_connection(guarded_url) as connection:
        started = time.monotonic()
        status, _, ended = answer_of(connection)
    assert status == 408 and ended - started > 0.9


@pytest.mark.parametrize("drip_s", [None, 0.2], ids=["stalled", "dripping past the total"])
def test_a_stalled_or_endless_body_gets_408_and_the_server_keeps_serving(guarded_url, drip_s):
    with raw_connection(guarded_url) as connection:
        started = time.monotonic()
        connection.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
        closed_while_dripping = drip_s is None
        try:  # a byte every 0.2 s (a fifth of the idle timeout) until the server closes
            while drip_s is not None and time.monotonic() - started < GUARD_S:
                time.sleep(drip_s)
                connection.sendall(b" ")
        except OSError:
            closed_while_dripping = True  # closed by the server after its 408
        status, text, _ = answer_of(connection)
    assert status == 408 and "BODY_" in text and closed_while_dripping
    assert httpx.get(f"{guarded_url}/health", timeout=10).status_code == 200


def test_a_slow_but_steady_body_is_served(guarded_url):
    body = json.dumps({"inputs": "not base64 audio!"}).encode()

    def steady() -> Iterator[bytes]:
        for start in range(0, len(body), 8):
            time.sleep(0.2)  # well inside the idle timeout, 0.2 s x 4 chunks inside the total
            yield body[start : start + 8]

    answer = httpx.post(guarded_url, content=steady(), headers={"Content-Type": "application/json"}, timeout=10)
    assert answer.status_code == 400  # read to the end and judged on what it says, not timed out


def held_connections(stack: ExitStack, base_url: str) -> None:
    """The cap's worth of connections that send nothing. The server accepts connections in the order
    they arrive, so these are counted before any opened after them."""
    for _ in range(CAPPED.max_connections):
        stack.enter_context(raw_connection(base_url))


def test_connections_beyond_the_cap_get_503_and_the_server_recovers(capped_url):
    with ExitStack() as stack:
        held_connections(stack, capped_url)
        with raw_connection(capped_url) as extra:
            status, text, _ = answer_of(extra)
        assert status == 503 and "too many open connections" in text
    deadline = time.monotonic() + GUARD_S  # the closed connections are freed once the server has seen them go
    while (health := httpx.get(f"{capped_url}/health", timeout=GUARD_S)).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert health.status_code == 200


def test_keep_alive_connections_serve_one_request_after_another(guarded_url):
    with httpx.Client(base_url=guarded_url, timeout=10) as client:
        for _ in range(3):
            assert client.get("/health").status_code == 200
            time.sleep(0.6)  # under the keep-alive timeout; the header deadline must not fire in between


def closed_by_the_server_while_dripping(connection: socket.socket, seconds: float) -> float | None:
    """Send a byte every 0.2 s for up to ``seconds``; when the server closes, how long it took."""
    connection.settimeout(0.2)
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            connection.sendall(b"x")
            if connection.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:  # reset or broken pipe: closed
            return time.monotonic() - started
    return None


UNREAD_BODIES = {
    "GET /health, chunked body": b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nx",
    "GET /health, huge Content-Length": b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\nx",
    "405 route": b"PUT /health HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\nx",
    "404 route": b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx",
}


@pytest.mark.parametrize("request_head", UNREAD_BODIES.values(), ids=UNREAD_BODIES.keys())
def test_a_body_nobody_reads_cannot_hold_the_connection_by_dripping(guarded_url, request_head):
    """Incoming bytes used to cancel the keep-alive timer, and the body timeout wraps only what a
    route reads: a byte now and then held such a connection forever (4 of them: a lock-out)."""
    with raw_connection(guarded_url) as connection:
        connection.sendall(request_head)
        closed_after = closed_by_the_server_while_dripping(connection, seconds=GUARD_S)
    # routes that never read it: closed with the answer; a POST's body is read (and bounded) by BODY_TIMEOUT_S
    assert closed_after is not None, "the connection was held for as long as the client dripped"


def test_attackers_at_the_connection_cap_cannot_lock_out_health_checks(guarded_url):
    with ExitStack() as stack:
        attackers = [stack.enter_context(raw_connection(guarded_url)) for _ in range(LIMITS.max_connections)]
        for connection in attackers:
            connection.sendall(UNREAD_BODIES["GET /health, chunked body"])
        deadline = time.monotonic() + GUARD_S
        for connection in attackers:  # they keep dripping; the server closes each
            assert closed_by_the_server_while_dripping(connection, seconds=max(deadline - time.monotonic(), 0.1)) is not None
        assert httpx.get(f"{guarded_url}/health", timeout=5).status_code == 200


def test_oversized_request_heads_are_refused_while_they_arrive(guarded_url):
    """A 64-MB URL or header used to be buffered in full (seconds of event-loop time) before the
    16-kB header limit applied; now 431 comes once 32 kB have arrived, and nothing more is read."""
    for head in (b"GET /" + b"a" * 40_000, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 40_000):
        with raw_connection(guarded_url) as connection:
            connection.sendall(head)
            status, text, _ = answer_of(connection)
        assert status == 431 and "32 kB" in text
    assert httpx.get(f"{guarded_url}/health", timeout=5).status_code == 200


def test_a_head_just_under_the_bound_is_served(guarded_url):
    assert httpx.get(f"{guarded_url}/health", headers={"X-Padding": "p" * 15_000}, timeout=5).status_code == 200


def test_expect_100_continue_over_the_upload_limit_gets_413_without_an_invitation(guarded_url):
    with raw_connection(guarded_url) as connection:
        connection.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: audio/wav\r\nContent-Length: 999999999\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        status, text, _ = answer_of(connection)
    assert status == 413 and "100 Continue" not in text


@pytest.fixture
def dropped() -> Iterator[threading.Event]:
    """Set when the guard logs that it dropped a connection whose client stopped reading."""
    seen = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "stopped reading" in record.getMessage():
                seen.set()

    watch = Watch()
    guard_log = connection_guard.logger
    guard_log.addHandler(watch)
    level = guard_log.level
    guard_log.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        guard_log.removeHandler(watch)
        guard_log.setLevel(level)


def test_a_client_that_never_reads_its_answers_is_dropped(guarded_url, dropped):
    """Pipelined requests whose answers are never read: once writing stalls past
    WRITE_TIMEOUT_S the connection is dropped instead of holding the answers forever."""
    requests = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * 2000  # about 27 MB of answers
    with raw_connection(guarded_url) as connection:
        connection.sendall(requests)
        # Read nothing until the server has given up on us (reading would unstall its writes), as its log
        # says (its reset does not reach a client whose receive window is full, so the socket cannot tell). A
        # fixed sleep here lost the race on a busy machine, where filling the buffers took longer than it.
        assert dropped.wait(GUARD_S), "the server kept a connection whose answers are never read"
        connection.settimeout(5)
        received = 0
        try:
            while chunk := connection.recv(1 << 20):
                received += len(chunk)
        except OSError:
            pass
    whole = 2000 * len(httpx.get(f"{guarded_url}/openapi.json", timeout=5).content)
    assert received < whole / 2, (received, whole)


def test_the_connection_cap_says_when_to_retry(capped_url):
    with ExitStack() as stack:
        held_connections(stack, capped_url)
        with raw_connection(capped_url) as extra:
            status, text, _ = answer_of(extra)
    assert status == 503 and "retry-after: 1" in text.lower()
