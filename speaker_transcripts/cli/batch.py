"""``speaker-transcripts batch``: a corpus of recordings in, one row per file out (Ray Data).

    speaker-transcripts batch calls/ more/*.wav list.txt --out results/ --format parquet --workers 2

INPUTs are audio files, folders (searched recursively for audio), glob patterns, text manifests
(``.txt``: a path or URI a line), or URIs pyarrow reads (``s3://bucket/calls/``). Rows go to
``--out``: ``results.jsonl`` (always; the record that makes a rerun resume) and, with ``--format
parquet``, ``results.parquet``. With no ``--address`` a local Ray instance sized to this machine
runs the job; ``--address auto`` (or ``ray://head:10001``) runs it on a cluster. When diarizing, the
speakers of all the files are linked (``corpus_speaker`` in every segment, ``speakers.json`` beside
the rows; ``--no-link-speakers`` turns it off). The request
options are the ``transcribe`` command's. Exit status: 0 when every file was transcribed, 1 when
some got an error row, 2 for unusable arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from speaker_transcripts.cli import described
from speaker_transcripts.cli.options import add_request_options, checked_parameters, model_settings
from speaker_transcripts.console import one_line
from speaker_transcripts.errors import InvalidRequestError

EXIT_FILE_FAILED = 1
EXIT_USAGE = 2


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="speaker-transcripts batch", description=described(__doc__))
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders, glob patterns, manifests (.txt) or URIs")
    parser.add_argument("--out", type=Path, required=True, help="folder for results.jsonl (and results.parquet)")
    parser.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl", help="rows as JSON lines, or Parquet too")
    parser.add_argument("--workers", type=int, default=1, help="actors, each with its own copy of the models (default: 1)")
    parser.add_argument("--cpus-per-worker", type=float, help="default: this machine's cores shared out between the workers")
    parser.add_argument("--gpus-per-worker", type=float, default=0.0, help="e.g. 1 on GPU nodes (default: 0)")
    parser.add_argument("--no-link-speakers", dest="link_speakers", action="store_false",
                        help="leave each file's speakers to itself (default: the same person gets one label, corpus_speaker, "
                             "in every file, and speakers.json lists the people)")
    parser.add_argument("--address", help="an existing Ray cluster: auto, or ray://HOST:10001 (default: a local instance)")
    add_request_options(parser)
    arguments = parser.parse_args(argv)
    if arguments.workers < 1:
        parser.error("--workers must be at least 1")
    return arguments


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        from speaker_transcripts.batch.inputs import InputError, expand_inputs
        from speaker_transcripts.batch.job import BatchOptions, run_files
        from speaker_transcripts.batch.results import OutputInUse
    except ModuleNotFoundError as missing:
        print(f"speaker-transcripts batch needs Ray Data ({missing.name} is not installed): pip install 'speaker-transcripts[batch]'",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        files = expand_inputs(arguments.inputs)  # unusable inputs stop here, before Ray and the models start
        parameters = checked_parameters(arguments)  # and the --speaker clips
    except (InputError, InvalidRequestError) as error:
        print(f"speaker-transcripts batch: {one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    options = BatchOptions(
        address=arguments.address, workers=arguments.workers, cpus_per_worker=arguments.cpus_per_worker,
        gpus_per_worker=arguments.gpus_per_worker, output_format=arguments.format, link_speakers=arguments.link_speakers,
    )
    try:
        summary = run_files(files, arguments.out, model_settings(arguments), parameters, options)
    except OutputInUse as busy:
        print(f"speaker-transcripts batch: {busy}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_FILE_FAILED if summary.failed else 0
