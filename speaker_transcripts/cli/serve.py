"""``speaker-transcripts serve``: the server on Uvicorn with the connection guard, the recommended way to serve."""

from __future__ import annotations

import argparse
import errno
import os
import socket
import ssl
import sys
from pathlib import Path

from speaker_transcripts.server.connection_guard import GuardedServer, guarded_config


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="speaker-transcripts serve", description="Serve the models over HTTP (Uvicorn with the connection guard)."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    parser.add_argument("--ssl-certfile", default=os.environ.get("SSL_CERTFILE") or None, type=Path,
                        help="serve HTTPS (and wss:// for live sessions) with this certificate chain, PEM (env SSL_CERTFILE); "
                             "browsers give the page's Record the microphone only over HTTPS or at localhost")
    parser.add_argument("--ssl-keyfile", default=os.environ.get("SSL_KEYFILE") or None, type=Path,
                        help="the certificate's private key, PEM (env SSL_KEYFILE)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``speaker-transcripts serve --host 0.0.0.0 --port 8000``."""
    arguments = parse_arguments(argv)
    problem = unbindable(arguments.host, arguments.port)
    if problem:  # say so now, not after the models have loaded
        print(f"speaker-transcripts serve: cannot listen on {arguments.host}:{arguments.port}: {problem}", file=sys.stderr)
        return 2
    tls = unusable_tls(arguments.ssl_certfile, arguments.ssl_keyfile)
    if tls:
        print(f"speaker-transcripts serve: cannot serve HTTPS: {tls}", file=sys.stderr)
        return 2
    from speaker_transcripts.server.app import app  # after parsing: --help needs no FastAPI app

    options = {"ssl_certfile": str(arguments.ssl_certfile), "ssl_keyfile": str(arguments.ssl_keyfile)} if arguments.ssl_certfile else {}
    GuardedServer(guarded_config(app, host=arguments.host, port=arguments.port, log_level=arguments.log_level, **options)).run()
    return 0


def unusable_tls(certfile: Path | None, keyfile: Path | None) -> str | None:
    """Why the certificate and key cannot serve HTTPS (one without the other, unreadable, not PEM, not a
    pair), or None; checked as Uvicorn will load them, before the models load rather than after."""
    if certfile is None and keyfile is None:
        return None
    if certfile is None or keyfile is None:
        return "give both --ssl-certfile and --ssl-keyfile (or SSL_CERTFILE and SSL_KEYFILE)"
    missing = [str(path) for path in (certfile, keyfile) if not path.is_file()]
    if missing:
        return f"{' and '.join(missing)}: no such file"
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(certfile, keyfile)
    except ssl.SSLError as error:
        return f"{certfile} and {keyfile} are not a PEM certificate and its private key ({error.reason or error})"
    except OSError as error:
        return f"{certfile} and {keyfile}: {error.strerror or error}"
    return None


def unbindable(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host:port`` (in use, not this machine's address), or
    None. A trial bind, as Uvicorn will bind (``SO_REUSEADDR``), released at once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        return error.strerror or str(error)
    family, kind, protocol, _, address = infos[0]
    with socket.socket(family, kind, protocol) as trial:
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            trial.bind(address)
        except OSError as error:
            return "the port is in use" if error.errno == errno.EADDRINUSE else (error.strerror or str(error))
    return None
