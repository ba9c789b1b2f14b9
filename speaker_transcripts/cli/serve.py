"""``speaker-transcripts serve``: the server on Uvicorn with the connection guard, the recommended way to serve."""

from __future__ import annotations

import argparse
import errno
import socket
import sys

import uvicorn

from speaker_transcripts.server.connection_guard import guarded_config


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="speaker-transcripts serve", description="Serve the models over HTTP (Uvicorn with the connection guard)."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``speaker-transcripts serve --host 0.0.0.0 --port 8000``."""
    arguments = parse_arguments(argv)
    problem = unbindable(arguments.host, arguments.port)
    if problem:  # say so now, not after the models have loaded
        print(f"speaker-transcripts serve: cannot listen on {arguments.host}:{arguments.port}: {problem}", file=sys.stderr)
        return 2
    from speaker_transcripts.server.app import app  # after parsing: --help needs no FastAPI app

    uvicorn.Server(guarded_config(app, host=arguments.host, port=arguments.port, log_level=arguments.log_level)).run()
    return 0


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
