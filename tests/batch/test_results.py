"""The record of a batch job: rows survive a kill, one row per input at the end, Parquet that
reads back (no Ray, no models)."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from speaker_transcripts.batch.inputs import InputFile
from speaker_transcripts.batch.results import JOURNAL, SCHEMA, ResultsLog


def file(name: str, size: int = 10) -> InputFile:
    return InputFile(f"/corpus/{name}", size, 1)


def row(source: InputFile, error: str | None = None, text: str = "hello") -> dict:
    return {"path": source.path, "size_bytes": source.size, "mtime_ns": source.mtime_ns, "duration": 2.5, "language": "en",
            "text": None if error else text, "segments": [] if error else [{"speaker": "SPEAKER_00", "start": 0.0, "end": 2.5,
            "text": text}], "decoding": None if error else "batched (batch_size 24)", "warnings": [],
            "models": {"asr": "whisper-base", "assistant": None, "diarization": "pyannote-campplus"}, "seconds": 1.0,
            "error": error}


def test_a_line_cut_short_by_a_kill_is_dropped_and_the_rest_kept(tmp_path):
    log = ResultsLog(tmp_path)
    log.append(row(file("a.wav")))
    with (tmp_path / JOURNAL).open("a") as journal:
        journal.write('{"path": "/corpus/b.wav", "size_by')  # the kill came mid-line
    log.close()  # the killed job's lock goes with its process
    resumed = ResultsLog(tmp_path)
    assert resumed.finished() == {file("a.wav").key}
    assert (tmp_path / JOURNAL).read_text().count("\n") == 1 and (tmp_path / JOURNAL).read_text().endswith("}\n")


def test_failed_rows_are_retried_and_the_latest_row_is_kept_in_input_order(tmp_path):
    a, b, c = file("a.wav"), file("b.wav"), file("c.wav")
    log = ResultsLog(tmp_path)
    log.append(row(b, error="could not decode the audio"))
    log.append(row(a))
    assert log.finished() == {a.key}
    log.append(row(b, text="second try"))
    rows = log.finalise([a, b, c], parquet=True)
    assert [r["path"] for r in rows] == [a.path, b.path] and rows[1]["text"] == "second try"
    assert [json.loads(line)["path"] for line in (tmp_path / JOURNAL).read_text().splitlines()] == [a.path, b.path]
    table = pq.read_table(tmp_path / "results.parquet")
    assert table.schema.equals(SCHEMA)
    frame = pd.read_parquet(tmp_path / "results.parquet")
    assert list(frame.path) == [a.path, b.path] and frame.segments[1][0]["speaker"] == "SPEAKER_00"


def test_a_changed_file_is_not_finished(tmp_path):
    log = ResultsLog(tmp_path)
    log.append(row(file("a.wav", size=10)))
    log.close()
    assert file("a.wav", size=11).key not in ResultsLog(tmp_path).finished()


def test_a_second_job_on_the_same_folder_is_refused_until_the_first_ends(tmp_path):
    from speaker_transcripts.batch.results import OutputInUse

    first = ResultsLog(tmp_path)
    with pytest.raises(OutputInUse, match="another batch job is writing to"):
        ResultsLog(tmp_path)
    first.close()
    ResultsLog(tmp_path).close()
