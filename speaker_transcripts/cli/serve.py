"""``speaker-transcripts serve``: the server on Uvicorn with the connection guard, the recommended way to serve."""

from __future__ import annotations

import argparse

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
    from speaker_transcripts.server.app import app  # after parsing: --help needs no FastAPI app

    uvicorn.Server(guarded_config(app, host=arguments.host, port=arguments.port, log_level=arguments.log_level)).run()
    return 0
