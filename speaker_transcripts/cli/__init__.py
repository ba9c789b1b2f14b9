"""The console command: ``speaker-transcripts SUBCOMMAND ...`` (also ``python -m speaker_transcripts``).

Each subcommand is a module of this package with its own ``parse_arguments`` and ``main``; the
module is imported only when its subcommand runs, so ``--help`` and usage errors answer at once
instead of after torch has loaded.
"""

from __future__ import annotations

import gc
import importlib
import sys
from typing import NoReturn

from speaker_transcripts.console import show_package_log

SUBCOMMANDS = {
    "transcribe": ("transcribe", "transcribe local audio files, with speakers (json, txt, srt, vtt, rttm)"),
    "batch": ("batch", "transcribe a corpus (folders, globs, manifests, URIs) on Ray Data, one row per file"),
    "live": ("live", "follow a conversation live (a file at real-time pace, or a microphone), with speakers"),
    "serve": ("serve", "serve the Endpoints payload, the OpenAI audio API and live sessions over HTTP"),
    "models": ("models", "list the embedded models, or pull them into the cache"),
    "speakers": ("speakers", "enrol people once (a voice library), so every recording names them"),
    "client": ("client", "send a file to a deployed endpoint or to the server"),
    "deploy": ("deploy", "create or update the Inference Endpoint and wait until it runs"),
    "evaluate": ("evaluate", "score transcripts and speaker attribution on a manifest"),
}
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C (128 + SIGINT)


def described(docstring: str | None) -> str:
    """A subcommand's ``--help`` description: its module docstring's first paragraph, as plain text
    (the reST literals, ``KNOWN_SPEAKERS_DIR``, read as KNOWN_SPEAKERS_DIR)."""
    return (docstring or "").split("\n\n")[0].replace("``", "")


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = [f"  {name:{width}}  {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    return "usage: speaker-transcripts SUBCOMMAND [options]\n\nsubcommands:\n" + "\n".join(lines) + (
        "\n\n'speaker-transcripts SUBCOMMAND --help' describes each one.\n"
    )


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if not arguments or arguments[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0 if arguments else EXIT_USAGE
    name, rest = arguments[0], arguments[1:]
    if name not in SUBCOMMANDS:
        print(f"speaker-transcripts: unknown subcommand '{name}'\n\n{usage()}", end="", file=sys.stderr)
        return EXIT_USAGE
    show_package_log()
    try:
        module = importlib.import_module(f"{__name__}.{SUBCOMMANDS[name][0]}")
        return module.main(rest)
    except KeyboardInterrupt:  # Ctrl-C: the user knows why it stopped; 60 lines of traceback tell them nothing
        print(f"\nspeaker-transcripts {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run() -> NoReturn:
    """The console script: ``main``, then an exit that leaves the heap to the operating system.

    A process that has loaded the models holds some 640,000 Python objects; the collector's last pass over
    them at interpreter exit took 2.5-3 s beside other work here (10-20 s was seen on a busy machine after
    ``serve`` printed "Finished server process"). Freezing them first skips that pass (0.6 s); exit handlers
    still run, and the memory goes back to the system either way.
    """
    status = main()
    gc.freeze()
    sys.exit(status)
