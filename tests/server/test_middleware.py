"""What a browser on another site can make this server do (``middleware.SameOriginGate``), and the
headers every answer carries: a real Uvicorn on 127.0.0.1, httpx and ``websockets`` sending the
``Host``, ``Origin`` and ``Sec-Fetch-Site`` a browser would."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
import websockets
from servers import serving

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.server.app import create_app

OPEN = ServerSettings(allowed_origins="https://app.example")  # no API_KEY: the default


@pytest.fixture(scope="module")
def open_url(served_handler) -> Iterator[str]:
    with serving(create_app(lambda: served_handler, OPEN), OPEN) as base_url:
        yield base_url


def enrol(base_url: str, **headers: str) -> httpx.Response:
    """What a page's ``fetch(url, {method: "POST", mode: "no-cors", body: FormData})`` sends."""
    return httpx.post(f"{base_url}/v1/voices", data={"name": "Mallory"}, files={"file": ("x.wav", b"RIFF")}, headers=headers, timeout=30)


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}],
    ids=["another origin", "an opaque origin", "cross-site without Origin", "same site, other origin"],
)
def test_a_page_of_another_origin_cannot_change_the_voice_library(open_url, headers):
    answer = enrol(open_url, **headers)
    assert answer.status_code == 403 and "ALLOWED_ORIGINS" in answer.json()["error"]["message"]


def test_the_same_origin_and_an_allowed_one_reach_the_route(open_url):
    port = open_url.rsplit(":", 1)[1]
    for headers in ({"Origin": open_url}, {"Origin": f"http://localhost:{port}"}, {"Origin": "https://app.example"},
                    {"Sec-Fetch-Site": "same-origin"}, {}):
        if headers.get("Origin", "").startswith("http://localhost"):
            headers["Host"] = f"localhost:{port}"
        answer = enrol(open_url, **headers)
        # past the gate: this server keeps no library, and the route says so
        assert answer.status_code == 400 and "KNOWN_SPEAKERS_DIR" in answer.json()["error"]["message"], headers


def test_a_port_is_part_of_the_origin(open_url):
    port = int(open_url.rsplit(":", 1)[1])
    assert enrol(open_url, Origin=f"http://127.0.0.1:{port + 1}").status_code == 403


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "rebind.attacker.test."])
def test_an_unknown_host_name_is_refused_even_for_reads(open_url, host):
    """DNS rebinding: the attacker's name resolves here, and their page reads the answers as its own."""
    answer = httpx.get(f"{open_url}/v1/voices", headers={"Host": host}, timeout=30)
    assert answer.status_code == 400 and "ALLOWED_HOSTS" in answer.json()["error"]["message"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "app.localhost", "[::1]", "10.1.2.3:8080"])
def test_addresses_and_localhost_are_known_hosts(open_url, host):
    assert httpx.get(f"{open_url}/v1/voices", headers={"Host": host}, timeout=30).status_code == 200


def test_allowed_hosts_names_more_and_a_key_alone_turns_the_host_check_off(served_handler):
    named = ServerSettings(allowed_hosts="transcripts.example")
    keyed = ServerSettings(api_key="sk-hosts")
    with serving(create_app(lambda: served_handler, named), named) as named_url, serving(create_app(lambda: served_handler, keyed), keyed) as keyed_url:
        assert httpx.get(f"{named_url}/health", headers={"Host": "transcripts.example"}, timeout=30).status_code == 200
        assert httpx.get(f"{named_url}/health", headers={"Host": "other.example"}, timeout=30).status_code == 400
        # with API_KEY an attacker's page has no key to send: the name is not checked unless ALLOWED_HOSTS is set
        assert httpx.get(f"{keyed_url}/health", headers={"Host": "transcripts.example"}, timeout=30).status_code == 200
        cross = httpx.post(f"{keyed_url}/v1/voices", headers={"Origin": "http://evil.example", "Authorization": "Bearer sk-hosts"}, timeout=30)
        assert cross.status_code == 403  # a key does not let another origin's page in


def test_a_live_session_from_another_origin_is_refused(open_url):
    url = open_url.replace("http://", "ws://") + "/v1/realtime?intent=transcription"

    async def handshake(origin: str) -> int:
        try:
            async with websockets.connect(url, origin=origin):
                return 101
        except websockets.exceptions.InvalidStatus as refused:
            return refused.response.status_code

    async def both() -> list[int]:
        return [await handshake("http://evil.example"), await handshake(open_url)]

    assert asyncio.run(both()) == [403, 101]


def test_answers_say_nosniff_and_https_ones_ask_for_https_only(open_url):
    answer = httpx.get(f"{open_url}/v1/voices", timeout=30)
    assert answer.headers["x-content-type-options"] == "nosniff" and "strict-transport-security" not in answer.headers
