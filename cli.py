"""Transcribe local audio files with the same handler the endpoint runs.

    ASR_MODEL=openai/whisper-base python cli.py meeting.wav [more files...] [--language en]

Models come from the same env vars as the endpoint (ASR_MODEL, ASSISTANT_MODEL,
DIARIZATION_MODEL, HF_TOKEN). Prints one JSON result per file; a file that cannot be
transcribed is reported on stderr, the others still run, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from errors import InvalidRequestError


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="audio files (wav, flac, mp3, ogg, opus, m4a, webm)")
    parser.add_argument("--language", help="language code or name; detected when omitted")
    parser.add_argument("--task", choices=["transcribe", "translate"], default="transcribe")
    parser.add_argument("--assisted", action="store_true", help="speculative decoding with ASSISTANT_MODEL")
    parser.add_argument("--timestamps", choices=["segment", "word"], default="segment")
    parser.add_argument("--num-speakers", type=int, help="exact number of speakers, when diarizing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    from handler import EndpointHandler

    handler = EndpointHandler()
    parameters = {
        "task": arguments.task,
        "assisted": arguments.assisted,
        "return_timestamps": arguments.timestamps,
        **({"language": arguments.language} if arguments.language else {}),
        **({"num_speakers": arguments.num_speakers} if arguments.num_speakers else {}),
    }
    failures = 0
    for path in arguments.files:
        try:
            result = handler({"inputs": path.read_bytes(), "parameters": parameters})
        except (OSError, InvalidRequestError) as error:
            print(f"{path}: {error}", file=sys.stderr)
            failures += 1
            continue
        print(json.dumps({"file": str(path), **result}, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
