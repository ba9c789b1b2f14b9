"""The batch job on Ray Data: ``from_items`` of the file names (in at most ``MAX_BLOCKS`` blocks) ->
``map_batches`` over a pool of actors that each load the models once and read their files one at a
time -> rows streamed back to the driver, which records each as it arrives; when diarizing, the
speakers of all the rows are linked across files at the end (``batch/linking.py``, on the driver).

With no ``address`` a local Ray instance sized to the machine is started (and stopped at the
end); ``address="auto"`` or ``"ray://host:10001"`` joins an existing cluster, where every node
needs this package installed and the inputs readable (a shared folder or a bucket). Only names
travel through Ray and each actor holds one file at a time, so memory and the number of tasks are
bounded by the actors and ``MAX_BLOCKS``, not by the corpus (10,000 files: the first row after
35 s, 12 processes, ``bench/batch/batch_scaling.py``). A file the orchestrator refuses (undecodable, too long, ...) is a row with its error; a
file the job never reached is a row saying so: no input is silently dropped.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speaker_transcripts.batch.inputs import InputFile, expand_inputs
from speaker_transcripts.batch.linking import file_voices
from speaker_transcripts.batch.results import JOURNAL, PARQUET, SPEAKERS, ResultsLog
from speaker_transcripts.config import ModelSettings
from speaker_transcripts.console import one_line
from speaker_transcripts.errors import InvalidRequestError

# What the actors need from the driver's environment (a cluster's workers do not inherit it).
FORWARDED_ENVIRONMENT = (
    "HF_TOKEN", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "EMBEDDED_MODELS_DIR", "XDG_CACHE_HOME",
    "PYANNOTE_METRICS_ENABLED", "OMP_WAIT_POLICY", "DEVICE", "DTYPE", "SPEECH_GATE", "MAX_AUDIO_SECONDS", "MAX_BATCH_ITEMS",
    "PIP_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
)
# Ray's own switch (ray_constants.ENABLE_RAY_CLUSTER, meant for Windows and macOS): "0" makes a node take
# 127.0.0.1 as its address instead of the machine's network address.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
MAX_BLOCKS = 256  # the names are handed out in at most this many blocks: bounded scheduling, whatever the corpus
NEVER_REACHED = "the job ended before this file was transcribed; run the same command again to finish it"


@dataclass(frozen=True)
class BatchOptions:
    """Where and how wide the job runs."""

    address: str | None = None  # None: a local Ray instance sized to this machine
    workers: int = 1  # actors, each with its own copy of the models
    cpus_per_worker: float | None = None  # None: this machine's cores shared out between the workers
    gpus_per_worker: float = 0.0
    output_format: str = "jsonl"  # or "parquet" (results.jsonl is kept as the record either way)
    link_speakers: bool = True  # one label per person across the files (batch/linking.py), when diarizing


@dataclass
class BatchSummary:
    """What the job did, for the closing paragraph and the exit status."""

    total: int
    skipped: int = 0
    done: int = 0
    failed: int = 0
    audio_seconds: float = 0.0
    elapsed_s: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    people: int | None = None  # corpus speakers linked across the files; None when not linked

    def paragraph(self, out: Path, parquet: bool = False) -> str:
        rate = self.audio_seconds / self.elapsed_s if self.elapsed_s > 0 else 0.0
        written = f"{out / JOURNAL}" + (f" and {out / PARQUET}" if parquet else "")
        linked = "" if self.people is None else f"; {self.people} people across the files ({out / SPEAKERS})"
        return (
            f"{self.done + self.failed} of {self.total} files transcribed in {self.elapsed_s:.0f} s "
            f"({self.done} done, {self.failed} failed, {self.skipped} already done before this run); "
            f"{_amount(self.audio_seconds)} of audio, {rate:.1f} audio hours per hour (start-up included). "
            f"Rows: {written}{linked}"
        )


def _amount(seconds: float) -> str:
    """Audio time as a person reads it: 42 s, 12.5 min, 3.20 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


class TranscribeFiles:
    """A Ray actor: the orchestrator loaded once, then one row per file of every batch it is handed."""

    def __init__(self, settings: ModelSettings, parameters: dict[str, Any], link_speakers: bool = False) -> None:
        from speaker_transcripts.pipeline.transcriber import Transcriber

        self.transcriber = Transcriber(settings)
        # Linking needs each file's voices: asked for where the diarization embeds speakers and the request diarizes.
        embeds = self.transcriber.capabilities.embeds_speakers and parameters.get("diarize") is not False
        self.parameters = parameters | ({"return_speaker_embeddings": True} if link_speakers and embeds else {})
        configured = self.transcriber.configured
        self.models = {"asr": configured.asr_model, "assistant": configured.assistant_model,
                       "diarization": configured.diarization_model}

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        return {"row": [json.dumps(self.row(str(path), str(key))) for path, key in zip(batch["path"], batch["key"])]}

    def row(self, path: str, key: str) -> dict[str, Any]:
        """The file's row: read here, one file at a time, so the job holds one file per worker whatever the corpus."""
        started = time.perf_counter()
        result: dict[str, Any] = {}
        error = None
        try:
            result = self.transcriber({"inputs": read_input(path), "parameters": self.parameters})
        except InvalidRequestError as refused:
            error = str(refused)
        except Exception as failure:  # noqa: BLE001 (one file's failure is its row, never the job's end)
            error = f"internal error: {type(failure).__name__}: {failure}"
        return {
            "key": key,
            "duration": result.get("duration"),
            "language": result.get("language"),
            "text": result.get("text"),
            "segments": _segments(result, who_spoke_when=self.parameters.get("task") == "diarize"),
            "decoding": result.get("decoding"),
            "warnings": result.get("warnings", []),
            "speaker_embeddings": file_voices(result),
            "models": self.models,
            "seconds": round(time.perf_counter() - started, 3),
            "error": error,
        }


def _segments(result: dict[str, Any], who_spoke_when: bool) -> list[dict[str, Any]]:
    """Speaker segments when diarizing, Whisper's segments otherwise (speaker null); with
    ``task=diarize`` (``who_spoke_when``: no text) the speaker timeline, each turn with empty text."""
    if who_spoke_when:
        return [{"speaker": turn["speaker"], "start": turn["start"], "end": turn["end"], "text": ""}
                for turn in result.get("diarization") or []]
    pieces = result.get("speakers") or result.get("chunks") or []
    return [{"speaker": piece.get("speaker"), "start": piece["timestamp"][0], "end": piece["timestamp"][1],
             "text": piece["text"]} for piece in pieces]


def run_batch(
    inputs: list[str],
    out: Path,
    settings: ModelSettings,
    parameters: dict[str, Any],
    options: BatchOptions = BatchOptions(),
    report: Callable[[str], None] | None = None,
) -> BatchSummary:
    """Transcribe every audio file ``inputs`` name into the rows of ``out``; see the module docstring."""
    return run_files(expand_inputs(inputs), out, settings, parameters, options, report)


def run_files(
    files: list[InputFile],
    out: Path,
    settings: ModelSettings,
    parameters: dict[str, Any],
    options: BatchOptions = BatchOptions(),
    report: Callable[[str], None] | None = None,
) -> BatchSummary:
    """``run_batch`` on files already listed (the command lists them once, to refuse bad inputs early)."""
    say = report or (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.monotonic()
    log = ResultsLog(out)
    try:
        finished = log.finished()
        todo = [file for file in files if file.key not in finished]
        summary = BatchSummary(total=len(files), skipped=len(files) - len(todo))
        say(f"{len(files)} files; {summary.skipped} already done in {out}, {len(todo)} to transcribe")
        if todo:
            reached = _transcribe(todo, log, settings, parameters, options, summary, say, started)
            for file in todo:
                if file.key not in reached:  # nothing is silently dropped
                    log.append(_unreached_row(file))
                    summary.failed += 1
        summary.rows = log.finalise(files, parquet=options.output_format == "parquet", link=options.link_speakers)
        summary.people = log.people
    finally:
        log.close()
    summary.elapsed_s = time.monotonic() - started
    say(summary.paragraph(out, parquet=options.output_format == "parquet"))
    return summary


def _transcribe(
    todo: list[InputFile],
    log: ResultsLog,
    settings: ModelSettings,
    parameters: dict[str, Any],
    options: BatchOptions,
    summary: BatchSummary,
    say: Callable[[str], None],
    started: float,
) -> set[str]:
    started_ray = start_ray(options)
    import ray

    try:
        dataset = _dataset(todo, settings, parameters, options)
        by_key = {file.key: file for file in todo}
        reached: set[str] = set()
        try:
            for record in dataset.iter_rows():
                row = json.loads(record["row"])
                file = by_key[row.pop("key")]
                row = {"path": file.path, "size_bytes": file.size, "mtime_ns": file.mtime_ns, **row}
                log.append(row)
                reached.add(file.key)
                if row["error"] is None:
                    summary.done += 1
                    summary.audio_seconds += row["duration"] or 0.0
                    outcome = f"{row['duration']:.1f} s of audio in {row['seconds']:.1f} s"
                else:
                    summary.failed += 1
                    outcome = f"FAILED: {row['error']}"
                say(f"[{summary.done + summary.failed}/{len(todo)}] {one_line(file.path)}: {one_line(outcome)} "
                    f"({summary.failed} failed so far; {_amount(summary.audio_seconds)} of audio in {time.monotonic() - started:.0f} s)")
        except ray.exceptions.RayError as stopped:  # a worker process died (killed for memory, a crash in a native library)
            say(f"the job stopped: {one_line((str(stopped) or type(stopped).__name__).splitlines()[0])}; "
                f"{len(todo) - len(reached)} files not reached get an error row, and the same command again goes on from there")
        return reached
    finally:
        if started_ray:
            ray.shutdown()


def start_ray(options: BatchOptions) -> bool:
    """Join the cluster at ``address``, or start a local instance; True when this call started it.

    A local instance listens on loopback only: Ray otherwise binds its services to the machine's network
    address, where anyone who reaches them can run code in the job (a cluster's nodes need that, and token
    authentication, docs/batch.md, "On a Ray cluster"; one machine's job does not). Ray reads its switch for this
    when it is first imported, which the command does here.
    """
    if not options.address:
        os.environ.setdefault(LOOPBACK_ONLY, "0")
    import ray

    if ray.is_initialized():
        return False
    # Ray starts its workers at nice 15, so beside any other busy process (a CI neighbour, a second job)
    # the transcription itself got a sliver of the CPU: a 1-file job took minutes beside two spinning
    # processes. The workers do the job's work; they run at the driver's priority unless the user set one.
    os.environ.setdefault("RAY_worker_niceness", "0")
    environment = {name: os.environ[name] for name in FORWARDED_ENVIRONMENT if name in os.environ}
    ray.init(
        address=options.address,
        num_cpus=None if options.address else os.cpu_count(),
        include_dashboard=False,
        logging_level=logging.ERROR,  # Ray's start-up notices; each file's outcome is reported here instead
        log_to_driver=False,  # the workers' library chatter; each file's outcome is reported here
        runtime_env={"env_vars": environment},
    )
    return True


def _dataset(todo: list[InputFile], settings: ModelSettings, parameters: dict[str, Any], options: BatchOptions) -> Any:
    """The files as a dataset of names, which the actors read one at a time (``read_input``). Ray Data's
    own reader took a task and often a worker process per file: 1,000 files of 0.1 s gave 40+ workers,
    7.3 GB and no row in 8 minutes; names are bytes, and the actor pool bounds what is read at once."""
    import ray

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # one line per file instead
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # execution plans and "progress bars disabled"
    cpus = options.cpus_per_worker or max(1.0, (os.cpu_count() or 1) / options.workers)
    names = [{"path": file.path, "key": file.key} for file in todo]
    with warnings.catch_warnings():  # Ray 2.60 takes max_restarts only through its deprecated ray_remote_args
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated", category=DeprecationWarning)
        return ray.data.from_items(names, override_num_blocks=min(len(names), MAX_BLOCKS)).map_batches(
            TranscribeFiles,
            fn_constructor_kwargs={"settings": settings, "parameters": parameters, "link_speakers": options.link_speakers},
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=options.workers),
            num_cpus=cpus,
            num_gpus=options.gpus_per_worker or None,
            max_restarts=0,  # a dead worker ends the job (its files get rows; a rerun goes on), never restarts for ever
        )


def read_input(path: str) -> bytes:
    """A file's bytes, from a path or any URI pyarrow reads; anything but a regular file (a FIFO, a
    device, a folder) is refused unread (a FIFO would block the worker forever)."""
    try:
        if "://" in path:
            from pyarrow import fs

            filesystem, location = fs.FileSystem.from_uri(path)
            with filesystem.open_input_stream(location) as stream:
                return stream.read()
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise InvalidRequestError("not a regular file (a FIFO, a device or a folder): not read")
        return Path(path).read_bytes()
    except OSError as error:
        raise InvalidRequestError(f"cannot read the file ({error.strerror or error})") from None


def _unreached_row(file: InputFile) -> dict[str, Any]:
    return {"path": file.path, "size_bytes": file.size, "mtime_ns": file.mtime_ns, "duration": None, "language": None,
            "text": None, "segments": [], "decoding": None, "warnings": [], "speaker_embeddings": None, "models": None, "seconds": None,
            "error": NEVER_REACHED}
