"""Slow and stalled clients against a real Uvicorn server with the connection guard: headers
that trickle in, bodies that stall or drip, more connections than the cap, and the ordinary
slow-but-steady client that must still be served."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest
from servers import certificate_files, serving

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


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> dict[str, Any]:
    """A throwaway CA's certificate for 127.0.0.1: the server's files and the client's CA bundle."""
    return certificate_files(tmp_path_factory.mktemp("tls"))


def tls_options(certificate: dict[str, Any]) -> dict[str, str]:
    return {"ssl_certfile": certificate["ssl_certfile"], "ssl_keyfile": certificate["ssl_keyfile"]}


@pytest.fixture(scope="module")
def tls_url(served_handler, certificate) -> Iterator[str]:
    with serving(create_app(lambda: served_handler, LIMITS), LIMITS, **tls_options(certificate)) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def capped_tls_url(served_handler, certificate) -> Iterator[str]:
    with serving(create_app(lambda: served_handler, CAPPED), CAPPED, **tls_options(certificate)) as base_url:
        yield base_url


def tls_port(base_url: str) -> str:
    return base_url.replace("https://", "http://")  # raw_connection takes host:port after the scheme


HALF_A_CLIENT_HELLO = bytes.fromhex("160301020001") + b"\x00" * 10  # a handshake record's header, then nothing


@pytest.mark.parametrize("first_bytes", [b"", HALF_A_CLIENT_HELLO], ids=["nothing sent", "half a ClientHello"])
def test_a_tls_handshake_that_never_ends_is_closed_at_the_header_deadline(tls_url, first_bytes):
    """asyncio held such a connection 60 s, outside every limit: now HEADER_TIMEOUT_S from accept."""
    with raw_connection(tls_port(tls_url)) as connection:
        started = time.monotonic()
        connection.sendall(first_bytes)
        closed_after = None
        try:
            if connection.recv(65536) == b"":
                closed_after = time.monotonic() - started
        except OSError:  # reset: closed
            closed_after = time.monotonic() - started
    assert closed_after is not None and LIMITS.header_timeout_s * 0.9 < closed_after < GUARD_S


def test_connections_in_their_tls_handshake_count_towards_the_cap(capped_tls_url, certificate):
    """The cap's worth of connections that never start TLS: a real HTTPS client is refused, not served."""
    with ExitStack() as stack:
        for _ in range(CAPPED.max_connections):
            stack.enter_context(raw_connection(tls_port(capped_tls_url)))
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{capped_tls_url}/health", verify=certificate["ca"], timeout=GUARD_S)
    deadline = time.monotonic() + GUARD_S  # freed once the server has seen them close
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{capped_tls_url}/health", verify=certificate["ca"], timeout=GUARD_S)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    assert answer.status_code == 200 and answer.url.scheme == "https"


def test_https_serves_and_plain_http_on_its_port_is_told_to_use_https(tls_url, certificate):
    served = httpx.get(f"{tls_url}/health", verify=certificate["ca"], timeout=GUARD_S)
    assert served.status_code == 200 and served.headers["strict-transport-security"].startswith("max-age=")
    plain = httpx.get(f"{tls_port(tls_url)}/health", timeout=GUARD_S)
    assert plain.status_code == 400 and "https://" in plain.json()["error"]


def test_one_client_address_cannot_take_every_connection(served_handler):
    """Connections reopened as fast as they are closed used to keep the global cap full for everyone."""
    settings = ServerSettings(header_timeout_s=300.0, max_connections=8, max_connections_per_client=3)
    with serving(create_app(lambda: served_handler, settings), settings) as base_url, ExitStack() as stack:
        for _ in range(settings.max_connections_per_client):
            stack.enter_context(raw_connection(base_url))
        with raw_connection(base_url) as extra:  # refused at accept, before it sends anything
            status, text, _ = answer_of(extra)
        assert status == 503 and "too many open connections" in text
        port = int(base_url.rsplit(":", 1)[1])  # another client address, still on loopback
        with socket.create_connection(("127.0.0.1", port), timeout=GUARD_S, source_address=("127.0.0.2", 0)) as other:
            other.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert answer_of(other)[0] == 200


def test_refused_connections_are_logged_as_one_summary_an_interval():
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect()
    connection_guard.logger.addHandler(handler)
    loop = asyncio.new_event_loop()
    try:
        refusals = connection_guard.RefusalLog(interval_s=0.05)
        for _ in range(500):
            refusals.refused(loop, "MAX_CONNECTIONS", "3 open")
        loop.run_until_complete(asyncio.sleep(0.2))
    finally:
        loop.close()
        connection_guard.logger.removeHandler(handler)
    assert lines == ["refused a connection: 3 open (MAX_CONNECTIONS)", "refused 499 more connections in the last 0.05 s (MAX_CONNECTIONS: 499)"]


def slow_upload(base_url: str, declared: int) -> socket.socket:
    """An upload that declares ``declared`` bytes and sends a few: what a slow sender looks like to the server."""
    host, port = base_url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=GUARD_S)
    connection.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n{{".encode())
    return connection


def test_slow_uploads_hold_what_they_sent_not_what_they_declared(served_handler, speech_wav):
    """Three uploads declaring the whole MAX_QUEUED_MB and sending a byte now and then used to keep every
    other upload out (503) for BODY_TIMEOUT_S; now they hold the bytes they sent, and another upload runs."""
    settings = ServerSettings(max_upload_mb=1, max_queued_mb=1, body_idle_timeout_s=300, body_min_rate_kb_s=0)
    with serving(create_app(lambda: served_handler, settings), settings) as base_url, ExitStack() as stack:
        for _ in range(3):
            stack.enter_context(slow_upload(base_url, settings.max_upload_bytes - 100))
        deadline = time.monotonic() + GUARD_S
        while httpx.get(base_url + "/ready", timeout=5).json()["queue"]["uploading"] < 3:  # all three admitted
            assert time.monotonic() < deadline
            time.sleep(0.05)
        answer = httpx.post(base_url + "/", content=speech_wav, headers={"Content-Type": "audio/wav"}, timeout=GUARD_S)
        assert answer.status_code == 200, answer.text


def test_an_upload_whose_bytes_would_pass_the_bound_is_refused_then(served_handler):
    settings = ServerSettings(max_upload_mb=1, max_queued_mb=1, body_idle_timeout_s=300, body_min_rate_kb_s=0)
    with serving(create_app(lambda: served_handler, settings), settings) as base_url, slow_upload(base_url, 600_000) as first:
        first.sendall(b" " * 599_998)  # nearly all of it: held, once the server has read it
        deadline = time.monotonic() + GUARD_S
        while httpx.get(base_url + "/ready", timeout=5).json()["queue"]["uploading_mb"] < 0.5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        host, port = base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=GUARD_S) as second:
            second.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 600000\r\n\r\n")
            try:
                second.sendall(b" " * 600_000)  # admitted (declared against what is held), refused as its bytes come
            except OSError:
                pass  # closed after its 503, with our bytes still arriving
            status, text, _ = answer_of(second)
    assert status == 503 and "MAX_QUEUED_MB" in text


def test_a_client_that_goes_on_sending_after_its_answer_is_closed_after_the_linger(guarded_url, monkeypatch):
    """Closing on unread bytes resets the answer away, so the server reads on after answering a request
    whose body is still coming, but only for LINGER_MAX_S: a client that never stops sending does not
    keep the connection."""
    monkeypatch.setattr(connection_guard, "LINGER_MAX_S", 1.0)
    with raw_connection(guarded_url) as connection:
        connection.sendall(UNREAD_BODIES["GET /health, huge Content-Length"])  # answered at once, the body unread
        connection.settimeout(0.05)
        answer, started = b"", time.monotonic()
        while time.monotonic() - started < GUARD_S:
            try:
                connection.sendall(b"x" * 1000)  # a byte stream that never ends, each gap far under LINGER_IDLE_S
                answer += connection.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # reset: the linger is over
                break
        else:
            pytest.fail("the connection was held for as long as the client sent")
    assert answer.startswith(b"HTTP/1.1 200 ")  # read before the end, not reset away


def test_a_body_dripping_below_the_rate_floor_is_closed_after_the_grace(served_handler):
    """A byte every 0.3 s is never idle for a second, yet would hold its connection for BODY_TIMEOUT_S."""
    settings = ServerSettings(body_idle_timeout_s=1.0, body_timeout_s=300.0, body_min_rate_kb_s=1.0)
    with serving(create_app(lambda: served_handler, settings), settings) as base_url, slow_upload(base_url, 100_000) as connection:
        closed_after = closed_by_the_server_while_dripping(connection, seconds=GUARD_S)
    assert closed_after is not None and closed_after < GUARD_S
