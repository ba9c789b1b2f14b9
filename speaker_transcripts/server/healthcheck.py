"""``python3 -m speaker_transcripts.server.healthcheck``: the container's health probe.

Asks the server in this container for ``/health`` on loopback, at ``PORT`` (8080 by default), over
HTTPS when it serves HTTPS (``SSL_CERTFILE`` set: ``serve`` reads the same variables); exit status 0
when it answers 200. The certificate is not checked: it names the server's public host, not 127.0.0.1,
and the probe never leaves the container. One probe for the Containerfile and compose.yaml.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request

TIMEOUT_S = 4.0  # under the HEALTHCHECK's 5-s timeout


def health_url() -> tuple[str, ssl.SSLContext | None]:
    """Where the probe asks, and the TLS context it asks with (None: plain HTTP)."""
    port = os.environ.get("PORT") or "8080"
    if not os.environ.get("SSL_CERTFILE"):
        return f"http://127.0.0.1:{port}/health", None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return f"https://127.0.0.1:{port}/health", context


def main() -> int:
    url, context = health_url()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S, context=context) as answer:
            return 0 if answer.status == 200 else 1
    except OSError as error:  # URLError and HTTPError (an answer other than 2xx) included
        print(f"unhealthy: {url}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
