"""HTTPS and other origins: TLS handshakes that never finish, flood after flood (descriptors held,
memory kept), plain HTTP on the TLS port, and what a page of another origin, or one reached by an
attacker's DNS name, can make the server do."""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import websockets

from probes.server import MAX_CONNECTIONS, Server

HALF_A_CLIENT_HELLO = bytes.fromhex("160301020001") + b"\x00" * 40


def certificate(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA's certificate for 127.0.0.1: (certificate, key, CA)."""
    import trustme

    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1")
    paths = folder / "cert.pem", folder / "key.pem", folder / "ca.pem"
    issued.cert_chain_pems[0].write_to_path(paths[0])
    issued.private_key_pem.write_to_path(paths[1])
    authority.cert_pem.write_to_path(paths[2])
    return paths


def handshake_floods(server: Server, rng: random.Random, rounds: int, connections: int, header_timeout_s: float) -> tuple[list[tuple], list[str]]:
    """``rounds`` floods of ``connections`` TCP connections to the TLS port that send nothing or half a
    ClientHello and stay open past the header timeout: the descriptors the server held at most, its RSS
    after each flood closed, and whether ``/health`` over HTTPS answered during the flood."""
    port = int(server.url.rsplit(":", 1)[1])
    idle = server.rss_mb()
    rows, failures = [], []
    for flood in range(1, rounds + 1):
        started = time.monotonic()
        with ExitStack() as stack:
            for _ in range(connections):
                try:
                    connection = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=5))
                    connection.sendall(rng.choice([b"", HALF_A_CLIENT_HELLO[: rng.randint(1, len(HALF_A_CLIENT_HELLO))]]))
                except OSError:
                    pass  # refused at once: beyond the cap
            time.sleep(header_timeout_s + 1)
            try:
                health = httpx.get(server.url + "/health", verify=server.verify, timeout=10).status_code
            except httpx.HTTPError as error:
                health = type(error).__name__
        time.sleep(2)
        rss = server.rss_mb()
        held = server.most_descriptors_since(started)
        rows.append((flood, connections, held, round(rss), round(rss - idle), health))
        if held > MAX_CONNECTIONS + 40:
            failures.append(f"flood {flood}: {held} descriptors held (MAX_CONNECTIONS={MAX_CONNECTIONS})")
    if rows[-1][3] - rows[0][3] > 50:
        failures.append(f"memory grew flood after flood: {rows[0][3]} -> {rows[-1][3]} MB")
    try:
        plain = httpx.get(server.url.replace("https://", "http://") + "/health", timeout=10)
        answered = f"{plain.status_code} {plain.text[:60]}"
    except httpx.HTTPError as error:
        answered = type(error).__name__
    rows.append(("plain http:// to the TLS port", "", "", "", "", answered))
    if not answered.startswith("400"):
        failures.append(f"plain HTTP on the TLS port: {answered}")
    return rows, failures


def cross_site(server: Server, rng: random.Random) -> tuple[list[tuple], list[str]]:
    """A keyless server's voice library and live route as another origin's page (and a rebound DNS
    name) reach them: every attempt must be refused before the route runs."""
    port = int(server.url.rsplit(":", 1)[1])
    name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 12)))
    origins = [f"http://{name}.example", f"https://{name}.test:{rng.randint(1, 65535)}", "null",
               f"http://127.0.0.1:{port + rng.randint(1, 100)}", f"http://{name}.localhost:{port}"]
    rows, failures = [], []
    for origin in origins:
        answer = httpx.post(server.url + "/v1/voices", headers={"Origin": origin}, data={"name": "Mallory"},
                            files={"file": ("a.wav", b"RIFF")}, verify=server.verify, timeout=30)
        rows.append((f"POST /v1/voices, Origin {origin}", answer.status_code))
        if answer.status_code != 403:
            failures.append(f"cross-origin enrolment from {origin}: {answer.status_code}")
    for fetch_site in ("cross-site", "same-site"):
        answer = httpx.post(server.url + "/v1/voices", headers={"Sec-Fetch-Site": fetch_site}, verify=server.verify, timeout=30)
        rows.append((f"POST /v1/voices, Sec-Fetch-Site {fetch_site}", answer.status_code))
        if answer.status_code != 403:
            failures.append(f"Sec-Fetch-Site {fetch_site}: {answer.status_code}")
    for host in (f"{name}.example", f"{name}.attacker.test:{port}", f"{name}.example."):
        answer = httpx.get(server.url + "/v1/voices", headers={"Host": host}, verify=server.verify, timeout=30)
        rows.append((f"GET /v1/voices, Host {host}", answer.status_code))
        if answer.status_code != 400:
            failures.append(f"rebound Host {host}: {answer.status_code}")

    async def live_handshake() -> int:
        trust = ssl.create_default_context(cafile=server.verify) if isinstance(server.verify, str) else None
        try:
            async with websockets.connect(server.url.replace("http", "ws", 1) + "/v1/realtime?intent=transcription", origin=origins[0],
                                          ssl=trust):
                return 101
        except websockets.exceptions.InvalidStatus as refused:
            return refused.response.status_code

    status = asyncio.run(live_handshake())
    rows.append((f"live session, Origin {origins[0]}", status))
    if status != 403:
        failures.append(f"cross-origin live session: {status}")
    return rows, failures
