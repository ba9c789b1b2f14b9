"""The options every command that transcribes shares (``transcribe``, ``batch``): what to decode
and with which models, turned into the handler's parameters and the models' settings."""

from __future__ import annotations

import argparse
from typing import Any

from speaker_transcripts.config import ModelSettings


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """Language, task, timestamps, long form, prompt, assistant, diarization, speaker hints, models."""
    parser.add_argument("--language", help="language code or name; detected when omitted")
    parser.add_argument("--task", choices=["transcribe", "translate"], default="transcribe")
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
    }
    return {name: value for name, value in parameters.items() if value is not None}


def model_settings(arguments: argparse.Namespace) -> ModelSettings:
    """The environment's settings with the options' models, loading only what the run needs."""
    settings = ModelSettings.self_hosted()
    overrides = {
        "asr_model": arguments.asr_model or settings.asr_model,
        "assistant_model": (arguments.assistant_model or settings.assistant_model) if arguments.assistant else None,
        "diarization_model": None if arguments.diarize is False else arguments.diarization_model or settings.diarization_model,
        # A server warms up so its first request is not the slow one; a run's first file pays
        # for initialisation either way, so warming up would only add time (0.5 s with whisper-base).
        "warmup": settings.warmup if "warmup" in settings.model_fields_set else False,
    }
    if arguments.assistant and not overrides["assistant_model"]:
        raise SystemExit("--assistant needs an assistant model: set ASSISTANT_MODEL or pass --assistant-model")
    if arguments.diarize and not overrides["diarization_model"]:
        raise SystemExit("--diarize needs a diarization model: DIARIZATION_MODEL is off; unset it or pass --diarization-model")
    return settings.model_copy(update=overrides)
