"""The record of a batch job: one row per input file, appended as each file finishes, so a job
that is killed loses at most the files in flight, and a rerun skips what is done.

``results.jsonl`` in the output folder is the record itself: one JSON object a line, each flushed
and synced before the next file is reported. A line cut short by a kill is dropped on resume; at
the end the file is rewritten atomically with the latest row of each input, in input order, and
``results.parquet`` is written the same way when asked for. The row schema (path, size, mtime,
duration, language, text, segments, decoding, warnings, speaker embeddings, models, seconds, error)
is ``SCHEMA`` below and docs/batch.md, Rows.

When the job links speakers (the default when diarizing), the final rewrite fills each segment's
``corpus_speaker`` (``batch/linking.py``) and writes ``speakers.json``, one entry per person. Linking
runs on all the rows at the end, so a resumed job gives the labels an uninterrupted one would.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from speaker_transcripts.batch.inputs import InputFile
from speaker_transcripts.batch.linking import link_rows

JOURNAL = "results.jsonl"
PARQUET = "results.parquet"
SPEAKERS = "speakers.json"
SCHEMA = pa.schema([
    ("path", pa.string()), ("size_bytes", pa.int64()), ("mtime_ns", pa.int64()),
    ("duration", pa.float64()), ("language", pa.string()), ("text", pa.string()),
    ("segments", pa.list_(pa.struct([("speaker", pa.string()), ("start", pa.float64()), ("end", pa.float64()),
                                      ("text", pa.string()), ("corpus_speaker", pa.string())]))),
    ("decoding", pa.string()), ("warnings", pa.list_(pa.string())),
    ("speaker_embeddings", pa.list_(pa.struct([("speaker", pa.string()), ("speech_seconds", pa.float64()),
                                                ("embedding", pa.list_(pa.float32()))]))),
    ("models", pa.struct([("asr", pa.string()), ("assistant", pa.string()), ("diarization", pa.string())])),
    ("seconds", pa.float64()), ("error", pa.string()),
])


def row_key(row: dict[str, Any]) -> str:
    return InputFile(row["path"], row["size_bytes"], row["mtime_ns"]).key


LOCK = ".results.lock"


class OutputInUse(RuntimeError):
    """Another job is writing to the output folder."""


class ResultsLog:
    """The rows of one output folder, read back on resume and appended to as files finish. The
    folder is locked while the log is open (``close``): two jobs on one folder each reported success
    and the last one's rewrite dropped the other's rows, so the second is refused (``OutputInUse``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = (folder / LOCK).open("a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released by the kernel if the job dies
        except BlockingIOError:
            self._lock.close()
            raise OutputInUse(f"another batch job is writing to {folder}; wait for it to end, or choose another --out") from None
        self.journal = folder / JOURNAL
        self.rows = self._read_intact()  # key -> latest row
        self.people: int | None = None  # corpus speakers found by the last ``finalise``

    def close(self) -> None:
        """Let another job use the folder."""
        self._lock.close()

    def finished(self) -> set[str]:
        """Keys of the files whose latest row has no error: a rerun skips them and retries the rest."""
        return {key for key, row in self.rows.items() if row.get("error") is None}

    def append(self, row: dict[str, Any]) -> None:
        with self.journal.open("a", encoding="utf-8") as journal:
            journal.write(json.dumps(row, ensure_ascii=False) + "\n")
            journal.flush()
            os.fsync(journal.fileno())
        self.rows[row_key(row)] = row

    def finalise(self, order: Iterable[InputFile], parquet: bool, link: bool = False) -> list[dict[str, Any]]:
        """One row per input (the latest), in input order, rewritten atomically; Parquet beside it if
        asked; with ``link``, the speakers linked across the rows first and ``speakers.json`` written
        (``people`` says how many). A summary left by an earlier run that no longer holds is removed."""
        rows = [self.rows[file.key] for file in order if file.key in self.rows]
        linkable = link and any(row.get("speaker_embeddings") for row in rows)
        summary = link_rows(rows) if linkable else None
        if summary is None:
            for row in rows:
                for segment in row.get("segments") or []:
                    segment["corpus_speaker"] = None
        self.people = None if summary is None else len(summary)
        _replace(self.journal, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode())
        if parquet:
            temporary = self.folder / f".{PARQUET}.partial"
            pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), temporary)
            os.replace(temporary, self.folder / PARQUET)
        if summary is not None:
            _replace(self.folder / SPEAKERS, (json.dumps(summary, ensure_ascii=False, indent=1) + "\n").encode())
        else:
            (self.folder / SPEAKERS).unlink(missing_ok=True)
        return rows

    def _read_intact(self) -> dict[str, dict[str, Any]]:
        if not self.journal.exists():
            return {}
        data = self.journal.read_bytes()
        intact = data[: data.rfind(b"\n") + 1]  # a kill mid-write leaves a last line without its newline
        rows: dict[str, dict[str, Any]] = {}
        for line in intact.splitlines():
            try:
                row = json.loads(line)
                rows[row_key(row)] = row
            except (ValueError, KeyError, TypeError):
                continue  # not a row of ours: left out of the rewrite
        if len(intact) != len(data):
            _replace(self.journal, intact)
        return rows


def _replace(path: Path, content: bytes) -> None:
    temporary = path.with_name(f".{path.name}.partial")
    with temporary.open("wb") as stream:
        stream.write(content)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)
