"""Client secrets (``POST /v1/realtime/client_secrets``): short-lived keys a backend mints for a browser.

A secret opens realtime sessions only (the WebSocket route and WebRTC calls) until it expires,
each starting with the configuration it was minted with; the file routes, the voice library and
minting itself still need ``API_KEY`` (``HeaderGate`` knows secrets on ``REALTIME_PATHS`` only).
Secrets are random (``secrets.token_urlsafe``), held in memory by their SHA-256 (a lookup's
timing says nothing about a secret, and a final ``hmac.compare_digest`` checks it), bounded in
number (``REALTIME_MAX_CLIENT_SECRETS``), and never logged: a request's secret stays in its
headers, which nothing logs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

PREFIX = "ek_"
MIN_TTL_S, MAX_TTL_S, DEFAULT_TTL_S = 10, 7200, 600  # OpenAI's bounds and default for expires_after.seconds
REALTIME_PATHS = ("/v1/realtime", "/v1/realtime/calls")  # where a secret stands in for the key


@dataclass(frozen=True)
class ClientSecret:
    """One minted secret: when it expires (Unix seconds) and the sessions' starting configuration."""

    expires_at: int
    session: dict[str, Any] = field(default_factory=dict)


class TooManySecrets(Exception):
    """As many unexpired secrets are held as ``REALTIME_MAX_CLIENT_SECRETS`` allows."""


class ClientSecrets:
    """The unexpired secrets, at most ``limit``; expired ones are dropped as new ones are minted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[bytes, tuple[bytes, ClientSecret]] = {}  # SHA-256 -> (the secret, what it carries)

    def mint(self, ttl_s: int, session: dict[str, Any]) -> tuple[str, ClientSecret]:
        """A new secret's value and record; ``TooManySecrets`` when ``limit`` unexpired ones are held."""
        if len(self._held) >= self.limit:
            now = time.time()
            self._held = {digest: held for digest, held in self._held.items() if held[1].expires_at > now}
            if len(self._held) >= self.limit:
                raise TooManySecrets(f"{self.limit} client secrets are unexpired (REALTIME_MAX_CLIENT_SECRETS); try again later")
        value = PREFIX + secrets.token_urlsafe(32)
        record = ClientSecret(expires_at=int(time.time()) + ttl_s, session=session)
        self._held[_digest(value.encode())] = (value.encode(), record)
        return value, record

    def check(self, offered: bytes | None) -> ClientSecret | None:
        """What ``offered`` carries, if it is an unexpired secret minted here; None otherwise."""
        if not offered or not offered.startswith(PREFIX.encode()):
            return None
        held = self._held.get(_digest(offered))
        if held is None or not hmac.compare_digest(held[0], offered):
            return None
        if held[1].expires_at <= time.time():
            self._held.pop(_digest(offered), None)
            return None
        return held[1]


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()
