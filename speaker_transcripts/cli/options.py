"""The options every command that transcribes shares (``transcribe``, ``batch``): what to decode
and with which models, turned into the handler's parameters and the models' settings."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path
from typing import Any

from speaker_transcripts.config import ModelSettings, unset_if_empty
from speaker_transcripts.pipeline.audio import AUDIO_EXTENSIONS


def known_speaker(text: str) -> tuple[str, Path]:
    """``--speaker NAME=FILE``: checked when the command line is read (usage error, exit 2)."""
    name, separator, file = text.rpartition("=")
    if not separator or not name.strip() or not file:
        raise argparse.ArgumentTypeError(f"write it NAME=FILE (a name and a clip of their voice), got {text!r}")
    if not Path(file).is_file():
        raise argparse.ArgumentTypeError(f"{file}: no such file (the clip of {name.strip()!r})")
    return name.strip(), Path(file)


def speaker_folder(text: str) -> list[tuple[str, Path]]:
    """``--speakers DIR``: one clip per known speaker, named after them (``Alice.wav``)."""
    folder = Path(text)
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a folder (it should hold one clip per speaker, e.g. Alice.wav)")
    clips = sorted(path for path in folder.iterdir() if path.is_file() and path.suffix.lower() in AUDIO_EXTENSIONS)
    if not clips:
        raise argparse.ArgumentTypeError(f"{text}: holds no audio clips ({', '.join(sorted(AUDIO_EXTENSIONS))})")
    return [(path.stem, path) for path in clips]


def add_known_speaker_options(parser: argparse.ArgumentParser) -> None:
    """``--speaker NAME=FILE`` (repeatable) and ``--speakers DIR``."""
    parser.add_argument(
        "--speaker", action="append", default=[], type=known_speaker, metavar="NAME=FILE", dest="speakers",
        help="a known speaker: the name to give them and a few seconds of their voice (repeatable)",
    )
    parser.add_argument(
        "--speakers", type=speaker_folder, default=[], metavar="DIR", dest="speaker_folder",
        help="a folder of known speakers' clips, each named after its speaker (Alice.wav, Bob.flac)",
    )


def known_speakers_parameter(arguments: argparse.Namespace) -> list[dict[str, str]] | None:
    """The ``known_speakers`` parameter for the clips named on the command line (base64)."""
    clips = [*arguments.speaker_folder, *arguments.speakers]
    try:
        return [{"name": name, "audio": base64.b64encode(path.read_bytes()).decode("ascii")} for name, path in clips] or None
    except OSError as error:
        raise SystemExit(f"cannot read the clip {error.filename}: {error.strerror}") from None


def checked_parameters(arguments: argparse.Namespace) -> dict[str, Any]:
    """``request_parameters``, checked now as the server would check them, the ``--speaker`` clips
    included (decoded and cut to their speech by Silero): a bad clip is one line before any model
    loads, not one per file after the models have (``InvalidRequestError``)."""
    from speaker_transcripts.config import parse_parameters
    from speaker_transcripts.errors import InvalidRequestError
    from speaker_transcripts.pipeline.speech_gate import SpeechGate
    from speaker_transcripts.pipeline.transcriber import enrolment_speech

    parameters = request_parameters(arguments)
    config, _ = parse_parameters(parameters)  # --num-speakers 0, --min-speakers 3 --max-speakers 1
    if config.known_speakers:
        gate = SpeechGate()
        for speaker in config.known_speakers:
            enrolment_speech(speaker.name, speaker.audio, gate)
        if not model_settings(arguments).diarization_model:
            off = "--no-diarize" if arguments.diarize is False else "--diarization-model none" if arguments.diarization_model else "DIARIZATION_MODEL=none"
            raise InvalidRequestError(f"--speaker and --speakers name voices, which needs speaker diarization, and {off} turns it off: "
                                      "drop one or the other")
    return parameters


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """Language, task, timestamps, long form, prompt, assistant, diarization, speaker hints, models."""
    parser.add_argument("--language", help="language code or name; detected when omitted")
    parser.add_argument(
        "--task", choices=["transcribe", "translate", "diarize"], default="transcribe",
        help="diarize: only who spoke when (no transcript; pair with --format rttm or json)",
    )
    parser.add_argument("--timestamps", choices=["segment", "word"], default="segment")
    parser.add_argument(
        "--long-form", choices=["vad", "chunked"], default="vad",
        help="vad (default): decode the speech found, in pieces cut at pauses; chunked: the pipeline's fixed windows",
    )
    parser.add_argument("--prompt", help="text that came before the audio: names, spellings, style")
    parser.add_argument("--assistant", action="store_true", help="speculative decoding with the assistant model")
    parser.add_argument(
        "--diarize", action=argparse.BooleanOptionalAction, default=None,
        help="label speakers (default: yes, with DIARIZATION_MODEL or the embedded pipeline); --no-diarize skips it",
    )
    parser.add_argument("--num-speakers", type=int, help="exact number of speakers, when diarizing")
    parser.add_argument("--min-speakers", type=int)
    parser.add_argument("--max-speakers", type=int)
    add_known_speaker_options(parser)
    parser.add_argument("--asr-model", help="overrides ASR_MODEL")
    parser.add_argument("--assistant-model", help="overrides ASSISTANT_MODEL")
    parser.add_argument("--diarization-model", help="overrides DIARIZATION_MODEL")


def request_parameters(arguments: argparse.Namespace) -> dict[str, Any]:
    """The handler parameters the options stand for (unset options are left to the defaults)."""
    parameters = {
        "task": arguments.task,
        "return_timestamps": arguments.timestamps,
        "long_form": arguments.long_form,
        "assisted": arguments.assistant,
        "diarize": arguments.diarize,
        "language": arguments.language,
        "prompt": arguments.prompt,
        "num_speakers": arguments.num_speakers,
        "min_speakers": arguments.min_speakers,
        "max_speakers": arguments.max_speakers,
        "known_speakers": known_speakers_parameter(arguments),
    }
    return {name: value for name, value in parameters.items() if value is not None}


def model_settings(arguments: argparse.Namespace) -> ModelSettings:
    """The environment's settings with the options' models, loading only what the run needs."""
    settings = ModelSettings.self_hosted()
    overrides = {
        "asr_model": arguments.asr_model or settings.asr_model,
        "assistant_model": (arguments.assistant_model or settings.assistant_model) if arguments.assistant else None,
        "diarization_model": None if arguments.diarize is False else unset_if_empty(arguments.diarization_model or settings.diarization_model),
        # A server warms up so its first request is not the slow one; a run's first file pays
        # for initialisation either way, so warming up would only add time (0.5 s with whisper-base).
        "warmup": settings.warmup if "warmup" in settings.model_fields_set else False,
    }
    if arguments.assistant and not overrides["assistant_model"]:
        raise SystemExit("--assistant needs an assistant model: set ASSISTANT_MODEL or pass --assistant-model")
    if arguments.diarize and not overrides["diarization_model"]:
        raise SystemExit("--diarize needs a diarization model: DIARIZATION_MODEL is off; unset it or pass --diarization-model")
    return settings.model_copy(update=overrides)
