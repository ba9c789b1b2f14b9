"""Enrol people once, and every recording names them: the voice library (``KNOWN_SPEAKERS_DIR``).

    speaker-transcripts speakers add "Ann Lee" ann-1.wav ann-2.m4a     # a few seconds of each, one person
    speaker-transcripts speakers list
    speaker-transcripts speakers remove "Ann Lee"

The library is the folder ``--library`` names, else ``KNOWN_SPEAKERS_DIR``, else
``~/.local/share/speaker-transcripts/voices``. Each clip is checked and cut to its speech as a
request's known-speaker clip is, and embedded with the diarization pipeline's speaker-embedding model
(``DIARIZATION_MODEL``, or ``--diarization-model``; the embedded ``pyannote-campplus`` by default); the
person's voice is kept once, with the model it belongs to. ``transcribe``, ``batch``, ``live`` and
``serve`` name the library's people when ``KNOWN_SPEAKERS_DIR`` points at it.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

from speaker_transcripts.cli import described
from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.pipeline.voice_library import VoiceLibrary

DEFAULT_LIBRARY = Path("~/.local/share/speaker-transcripts/voices")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    from pydantic import ValidationError

    from speaker_transcripts.config import KnownSpeaker

    library_help = "the library's folder (default: KNOWN_SPEAKERS_DIR, else ~/.local/share/speaker-transcripts/voices)"
    parser = argparse.ArgumentParser(prog="speaker-transcripts speakers", description=described(__doc__))
    parser.add_argument("--library", type=Path, help=library_help)
    # --library after the subcommand too (speakers add NAME CLIP --library DIR); SUPPRESS keeps one given before it
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--library", type=Path, default=argparse.SUPPRESS, help=library_help)
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", parents=[after], help="enrol a person from a few seconds of their voice (one or more clips)")
    add.add_argument("name")
    add.add_argument("clips", nargs="+", type=Path)
    add.add_argument("--diarization-model", help="overrides DIARIZATION_MODEL (the model whose embeddings the library keeps)")
    commands.add_parser("list", parents=[after], help="the people enrolled, with their model")
    remove = commands.add_parser("remove", parents=[after], help="forget a person")
    remove.add_argument("name")
    arguments = parser.parse_args(argv)
    if arguments.command == "add":  # the name as every route checks it, before any model loads
        try:
            KnownSpeaker(name=arguments.name, audio="-")
        except ValidationError as error:
            parser.error(error.errors(include_url=False)[0]["msg"].removeprefix("Value error, "))
    for clip in getattr(arguments, "clips", []):
        if not clip.exists():
            parser.error(f"{clip}: no such file")
        if not clip.is_file():  # reading a FIFO would wait for a writer forever
            parser.error(f"{clip}: not a regular file (a FIFO, a device or a folder)")
    return arguments


def library_folder(arguments: argparse.Namespace) -> Path:
    return (arguments.library or Path(os.environ.get("KNOWN_SPEAKERS_DIR") or DEFAULT_LIBRARY)).expanduser()


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    library = VoiceLibrary(library_folder(arguments))
    if arguments.command == "list":
        voices = library.voices()
        for voice in voices:
            print(f"{voice.name}\t{voice.clips} clip(s)\t{voice.model}\t{voice.dimension} values")
        print(f"{len(voices)} voice(s) in {library.folder}", file=sys.stderr)
        return 0
    if arguments.command == "remove":
        if not library.remove(arguments.name):
            print(f"speaker-transcripts speakers: no voice named {arguments.name!r} in {library.folder}", file=sys.stderr)
            return 1
        print(f"removed {arguments.name!r} from {library.folder}", file=sys.stderr)
        return 0
    try:
        library.check_writable()  # before any clip is read or model loaded
        return _add(arguments, library)
    except InvalidRequestError as error:
        print(f"speaker-transcripts speakers: {error}", file=sys.stderr)
        return 2


def _add(arguments: argparse.Namespace, library: VoiceLibrary) -> int:
    import numpy as np

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models import registry
    from speaker_transcripts.pipeline.bandwidth import telephone_band
    from speaker_transcripts.pipeline.diarization import load_speaker_embedder
    from speaker_transcripts.pipeline.speech_gate import SpeechGate
    from speaker_transcripts.pipeline.transcriber import check_one_voice, enrolment_speech

    say = functools.partial(print, file=sys.stderr, flush=True)
    configured = ModelSettings.self_hosted()
    library.check_room(arguments.name, configured.max_voices)  # before any clip is read or model loaded
    say(f"speakers: checking {len(arguments.clips)} clip(s) for speech")
    gate = SpeechGate()
    speech = [enrolment_speech(arguments.name, clip.read_bytes(), gate) for clip in arguments.clips]  # all checked before any model loads
    if arguments.diarization_model:
        configured = configured.model_copy(update={"diarization_model": arguments.diarization_model})
    if not configured.diarization_model:
        raise InvalidRequestError("a voice is embedded with the diarization model: DIARIZATION_MODEL is off; pass --diarization-model")
    say(f"speakers: loading {configured.diarization_model}'s speaker-embedding model")
    settings = registry.prepare(configured)
    embed = load_speaker_embedder(settings, "cpu")
    if embed is None:
        raise InvalidRequestError(f"{configured.diarization_model} has no speaker-embedding model to enrol with (a pyannote pipeline has)")
    say(f"speakers: embedding the voice of {arguments.name}")
    check_one_voice(arguments.name, np.concatenate(speech), embed)  # clips of two people, or a turn of two
    voice = library.add(arguments.name, [embed(clip) for clip in speech], configured.diarization_model,
                        telephone=[embed(telephone_band(clip)) for clip in speech], max_voices=configured.max_voices)
    print(f"enrolled {voice.name!r} from {voice.clips} clip(s) in {library.folder} ({voice.model})", file=sys.stderr)
    return 0
