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
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from speaker_transcripts.cli import described
from speaker_transcripts.cli.options import add_request_options, checked_parameters, model_settings
from speaker_transcripts.config import timed_by_words
from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.output.formats import OUTPUT_FORMATS, SUBTITLE_FORMATS, SubtitleRules, render
from speaker_transcripts.pipeline.audio import AUDIO_EXTENSIONS, SAMPLING_RATE, decode_file, probe_file
from speaker_transcripts.pipeline.transcriber import NO_SPEECH

EXIT_FILE_FAILED = 1
EXIT_NOT_STARTED = 2


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="speaker-transcripts transcribe", description=described(__doc__))
    parser.add_argument("files", nargs="+", type=Path, help="audio files (wav, flac, mp3, ogg, opus, m4a, webm, ...)")
    parser.add_argument("--format", choices=OUTPUT_FORMATS, default="json", help="output format (default: json)")
    parser.add_argument("--out", type=Path, help="write <name>.<format> files here instead of printing")
    add_request_options(parser)
    defaults = SubtitleRules()
    subtitles = parser.add_argument_group("subtitle rules (srt, vtt)")
    subtitles.add_argument("--max-line-chars", type=int, default=defaults.max_line_chars, help="characters per line (default: %(default)s)")
    subtitles.add_argument("--max-lines", type=int, default=defaults.max_lines, help="lines per cue (default: %(default)s)")
    subtitles.add_argument("--max-cue-seconds", type=float, default=defaults.max_cue_s, help="longest cue (default: %(default)s)")
    subtitles.add_argument(
        "--min-cue-seconds", type=float, default=defaults.min_cue_s,
        help="shortest cue, where the next one leaves room (default: %(default)s)",
    )
    parser.add_argument("--plot", action="store_true", help="also write <name>.png: who spoke when, with the text")
    return parser.parse_args(argv)


def load_handler(arguments: argparse.Namespace) -> Any:
    """The handler with only the models this run needs."""
    from speaker_transcripts.pipeline.transcriber import Transcriber

    return Transcriber(settings=model_settings(arguments))


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
    if arguments.task == "diarize" and arguments.format in ("txt", "srt", "vtt"):
        print(f"speaker-transcripts transcribe: error: --task diarize gives the speaker timeline, not text: use --format rttm "
              f"(or json), not {arguments.format}", file=sys.stderr)
        return EXIT_NOT_STARTED
    if arguments.format == "rttm" and arguments.diarize is False:
        print("speaker-transcripts transcribe: error: --format rttm is the speaker timeline; drop --no-diarize", file=sys.stderr)
        return EXIT_NOT_STARTED
    # Everything a user can get wrong is checked here, in a second, not after the models have loaded.
    try:
        parameters = checked_parameters(arguments)  # reads the --speaker clips once, and checks them
        check_language(arguments.language)
        files = input_files(arguments.files)
        documents = output_paths(files, arguments.out, arguments.format) if arguments.out else {}
        plots = output_paths(files, arguments.out or Path.cwd(), "png") if arguments.plot else {}
        check_writable(arguments.out, [*documents.values(), *plots.values()])
    except (InvalidRequestError, UsageError) as error:
        print(f"speaker-transcripts transcribe: error: {error}", file=sys.stderr)
        return EXIT_NOT_STARTED
    failures = 0
    audio_files = []
    for path in files:
        try:
            probe_file(path)
            audio_files.append(path)
        except InvalidRequestError as error:
            print(f"{path}: {error}", file=sys.stderr)
            failures += 1
    if not audio_files:  # each file was reported: a file that cannot be read is exit 1, as when others could
        return EXIT_FILE_FAILED
    try:
        handler = load_handler(arguments)
    except (OSError, RuntimeError, ValueError) as error:
        print(f"could not load the models: {error}", file=sys.stderr)
        return EXIT_NOT_STARTED
    if arguments.format in SUBTITLE_FORMATS:
        parameters = timed_by_words(parameters, handler.capabilities)
    several = len(files) > 1
    for path in tqdm(audio_files, desc="files", unit="file", disable=None if several else True):
        try:
            result = transcribe_file(handler, path, parameters)
        except (OSError, InvalidRequestError) as error:
            tqdm.write(f"{path}: {error}", file=sys.stderr)
            failures += 1
            continue
        for warning in result["warnings"]:  # a person reads them whatever the format (an empty document, a name not given)
            tqdm.write(f"{path}: {'' if warning == NO_SPEECH else 'warning: '}{warning}", file=sys.stderr)
        try:
            write_result(path, result, arguments.format, documents.get(path), header=several, rules=rules)
            if path in plots:
                from speaker_transcripts.output.plot import plot_timeline

                plot_timeline(result, plots[path], title=path.name)
            written = [str(target) for target in (documents.get(path), plots.get(path)) if target is not None]
            if written:
                tqdm.write(f"{path}: wrote {' and '.join(written)}", file=sys.stderr)
        except OSError as error:  # a full disk, a folder removed meanwhile: the transcript is not lost
            tqdm.write(f"{path}: cannot write {error.filename or 'the output'} ({error.strerror}); "
                       f"the {arguments.format} follows on stdout", file=sys.stderr)
            write_result(path, result, arguments.format, None, header=True, rules=rules)
            failures += 1
    return EXIT_FILE_FAILED if failures else 0


class UsageError(ValueError):
    """A command line that cannot work (missing input, unwritable output): exit 2 before any model loads."""


def input_files(paths: Iterable[Path]) -> list[Path]:
    """The files to transcribe: files as given, folders searched (recursively) for audio."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(candidate for candidate in path.rglob("*") if candidate.is_file() and candidate.suffix.lower() in AUDIO_EXTENSIONS)
            if not found:
                raise UsageError(f"{path}: the folder holds no audio files ({', '.join(sorted(AUDIO_EXTENSIONS))})")
            files += found
        elif path.exists():
            files.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return files


def check_language(language: str | None) -> None:
    """A language Whisper knows, by code (``de``) or name (``german``); whether the loaded model
    speaks it (English-only models) is checked once it has loaded."""
    if language is None:
        return
    from transformers.models.whisper.tokenization_whisper import LANGUAGES, TO_LANGUAGE_CODE

    code = language.strip().lower().removeprefix("<|").removesuffix("|>")
    if code not in LANGUAGES and code not in TO_LANGUAGE_CODE:
        raise UsageError(f"unknown language {language!r}; Whisper knows codes such as en, de, fr, or names such as german")


def check_writable(out: Path | None, destinations: Iterable[Path]) -> None:
    """``--out`` is (or can become) a folder and every output name fits the file system."""
    if out is not None:
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"--out {out}: cannot create it ({error.strerror})") from None
    for destination in destinations:
        limit = os.pathconf(destination.parent, "PC_NAME_MAX") if destination.parent.is_dir() else 255
        if len(os.fsencode(destination.name)) > limit:
            raise UsageError(f"{destination.name[:40]}...: the output name is longer than this file system allows ({limit} bytes)")


def transcribe_file(handler: Any, path: Path, parameters: dict[str, Any]) -> dict[str, Any]:
    """Decode once (for the progress bar's length), then run the handler on the samples."""
    audio = decode_file(path.read_bytes(), handler.settings.max_audio_seconds)
    with tqdm(total=round(audio.duration, 1), desc=path.name, unit=" s of audio", disable=None, leave=False) as bar:

        def advance(seconds_done: float) -> None:
            bar.update(round(seconds_done, 1) - bar.n)

        def stage(name: str) -> None:  # what the bar is waiting on: VAD, Whisper, or pyannote after Whisper is done
            bar.set_description(f"{path.name}: {name}")

        inputs = {"inputs": {"array": audio.samples, "sampling_rate": SAMPLING_RATE}, "parameters": parameters}
        return handler(inputs, advance, on_stage=stage)


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
        destination.write_text(render(result, output_format, rules, uri=path.stem), encoding="utf-8")
    elif output_format == "json":
        print(json.dumps({"file": str(path), **result}, ensure_ascii=False))
    else:
        if header:
            print(f"==> {path} <==")
        sys.stdout.write(render(result, output_format, rules, uri=path.stem))

