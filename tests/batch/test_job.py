"""The batch job on a local Ray instance (started once for the module), with tiny models: the
right rows, an error row for each bad file, both formats read back, resume, nothing dropped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from audio_files import pcm_wav

from speaker_transcripts.batch import job
from speaker_transcripts.batch.job import NEVER_REACHED, BatchOptions, run_batch
from speaker_transcripts.config import ModelSettings

ray = pytest.importorskip("ray", reason="the batch extra (Ray Data) is not installed")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local Ray for the module, started as the job starts it (workers at the driver's priority:
    at Ray's nice 15 the module took minutes beside a busy process)."""
    assert job.start_ray(BatchOptions())
    yield
    ray.shutdown()


@pytest.fixture
def corpus(tmp_path, speech_wav):
    folder = tmp_path / "corpus"
    (folder / "week").mkdir(parents=True)
    (folder / "good.wav").write_bytes(speech_wav)
    (folder / "week" / "quiet.wav").write_bytes(pcm_wav(np.zeros(16000)))
    (folder / "week" / "corrupt.wav").write_bytes(b"RIFF" + bytes(range(256)) * 8)
    (folder / "week" / "too-long.wav").write_bytes(pcm_wav(np.zeros(16000 * 7)))
    (folder / "week" / "notes.txt.md").write_text("not audio")
    return folder


@pytest.fixture
def settings(tiny_models):
    return ModelSettings(asr_model=str(tiny_models["whisper_en"]), diarization_model=None, max_audio_seconds=5, warmup=False)


OPTIONS = BatchOptions(workers=1, cpus_per_worker=1, output_format="parquet")


def test_every_file_gets_its_row_and_bad_files_their_errors(corpus, settings, tmp_path):
    lines: list[str] = []
    summary = run_batch([str(corpus)], tmp_path / "out", settings, {"language": "en"}, OPTIONS, report=lines.append)
    rows = {row["path"].split("/corpus/")[1]: row for row in summary.rows}
    assert set(rows) == {"good.wav", "week/quiet.wav", "week/corrupt.wav", "week/too-long.wav"}
    assert rows["good.wav"]["error"] is None and rows["good.wav"]["duration"] == pytest.approx(2.786, abs=0.01)
    assert rows["good.wav"]["models"]["asr"] == settings.asr_model and rows["good.wav"]["decoding"].startswith("batched")
    assert rows["week/quiet.wav"]["error"] is None and rows["week/quiet.wav"]["decoding"] == "none"
    assert "could not decode the audio" in rows["week/corrupt.wav"]["error"]
    assert "MAX_AUDIO_SECONDS" in rows["week/too-long.wav"]["error"]
    assert (summary.done, summary.failed, summary.skipped) == (2, 2, 0)
    assert lines[0].startswith("4 files") and lines[-1].startswith("4 of 4 files transcribed")
    assert lines[-1].endswith(f"{tmp_path / 'out' / 'results.jsonl'} and {tmp_path / 'out' / 'results.parquet'}")
    assert sum("FAILED" in line for line in lines) == 2

    jsonl = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    parquet = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert [row["path"] for row in jsonl] == list(parquet.path) == [row["path"] for row in summary.rows]
    assert pq.read_table(tmp_path / "out" / "results.parquet").to_pylist() == jsonl  # pandas reads None as NaN


def test_a_rerun_skips_what_is_done_and_retries_what_failed(corpus, settings, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_batch([str(corpus)], out, settings, {"language": "en"}, OPTIONS, report=lambda _: None)
    first = (out / "results.jsonl").read_text()
    read = []
    original = job._dataset
    monkeypatch.setattr(job, "_dataset", lambda todo, *rest: read.extend(file.path for file in todo) or original(todo, *rest))
    again = run_batch([str(corpus)], out, settings, {"language": "en"}, OPTIONS, report=lambda _: None)
    assert sorted(path.split("/")[-1] for path in read) == ["corrupt.wav", "too-long.wav"]
    assert (again.skipped, again.done, again.failed) == (2, 0, 2)
    assert [json.loads(line)["path"] for line in (out / "results.jsonl").read_text().splitlines()] == [
        json.loads(line)["path"] for line in first.splitlines()
    ]


@pytest.mark.filterwarnings("ignore:Use 'expr' instead of 'fn'")
def test_no_file_is_silently_dropped(corpus, settings, tmp_path, monkeypatch):
    """Should the dataset ever yield fewer rows than files (a lost block, a killed worker), each
    missing file still gets a row, saying it was never transcribed."""
    original = job._dataset
    monkeypatch.setattr(job, "_dataset", lambda *args: original(*args).filter(lambda record: "good.wav" not in record["row"]))
    summary = run_batch([str(corpus)], tmp_path / "out", settings, {"language": "en"}, OPTIONS, report=lambda _: None)
    (good,) = [row for row in summary.rows if row["path"].endswith("good.wav")]
    assert good["error"] == NEVER_REACHED and len(summary.rows) == 4


class _DiesOnGoodWav:
    """A worker that dies (its process exits) on one file's row, as a worker killed for memory does."""

    def __call__(self, rows: dict) -> dict:
        import os

        if any("good.wav" in row for row in rows["row"]):
            os._exit(1)
        return rows


def test_a_worker_that_dies_ends_the_job_with_one_line_and_a_row_for_every_file(corpus, settings, tmp_path, monkeypatch):
    """A dead worker is not restarted (Ray Data's default restarts it for ever, and a file that kills it
    every time hung the job): the job says why it stopped in one line, and the files it did not reach
    get the error row a rerun retries."""
    original = job._dataset
    monkeypatch.setattr(job, "_dataset", lambda *args: original(*args).map_batches(
        _DiesOnGoodWav, batch_size=1, compute=ray.data.ActorPoolStrategy(size=1), max_restarts=0))
    said: list[str] = []
    summary = run_batch([str(corpus)], tmp_path / "out", settings, {"language": "en"}, OPTIONS, report=said.append)
    (stopped,) = [line for line in said if line.startswith("the job stopped: ")]
    assert "not reached get an error row" in stopped and "\n" not in stopped, said
    (good,) = [row for row in summary.rows if row["path"].endswith("good.wav")]
    assert good["error"] == NEVER_REACHED and len(summary.rows) == 4 and summary.failed >= 1


def test_the_workers_run_at_the_drivers_priority():
    """Ray's default nice 15 starved the transcription beside any other busy process."""
    import os

    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)


def test_a_local_instance_listens_on_loopback_only():
    """The job's own Ray, in a process of its own without the suite's setting: every node's address is
    127.0.0.1 (by default Ray takes the machine's network address, where anyone reaching it runs code)."""
    import os
    import subprocess
    import sys

    script = ("from speaker_transcripts.batch.job import BatchOptions, start_ray; start_ray(BatchOptions()); import ray;"
              " print(sorted({node['NodeManagerAddress'] for node in ray.nodes()})); ray.shutdown()")
    environment = {name: value for name, value in os.environ.items() if name != job.LOOPBACK_ONLY}
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['127.0.0.1']"


def test_a_fifo_or_a_folder_given_as_a_file_gets_an_error_row_and_the_job_goes_on(corpus, settings, tmp_path):
    """Reading a FIFO would block a worker forever; Ray Data's reader ended the whole job on such inputs."""
    import os

    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)
    odd = tmp_path / "line\nbreak\tname.wav"
    odd.write_bytes((corpus / "good.wav").read_bytes())
    lines: list[str] = []
    summary = run_batch([str(fifo), str(odd), str(corpus / "good.wav")], tmp_path / "out", settings, {"language": "en"},
                        BatchOptions(workers=1, cpus_per_worker=1), report=lines.append)
    rows = {Path(row["path"]).name: row for row in summary.rows}
    assert "not a regular file" in rows["pipe.wav"]["error"]
    assert rows["line\nbreak\tname.wav"]["error"] is None and rows["good.wav"]["error"] is None
    progress = [line for line in lines if line.startswith("[")]
    assert len(progress) == 3 and all("\n" not in line for line in progress)  # a name cannot start a line of its own
    assert any("line\\nbreak\\tname.wav: " in line for line in progress), progress


def test_speakers_are_linked_across_files_and_a_rerun_gives_the_same_labels(tmp_path):
    """The embedded trained models (whisper-tiny.en, pyannote-campplus; pulled into the model cache the
    first time, as tests/end_to_end/test_embedded_real.py does) on the committed sample and its clips:
    each reader's clip is linked to that reader in the conversation, the impostor to nobody; rows keep
    each file's voices, speakers.json lists the people, and a resumed job labels as the first did."""
    samples = Path(__file__).resolve().parents[2] / "samples"
    inputs = [str(samples / "two-readers.wav")] + [str(samples / "enrolment" / f"{name}.wav") for name in ("reader-a", "reader-b", "impostor")]
    settings = ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus", warmup=False)
    out = tmp_path / "out"
    lines: list[str] = []
    summary = run_batch(inputs, out, settings, {"language": "en"}, OPTIONS, report=lines.append)
    assert summary.failed == 0
    conversation, reader_a, reader_b, impostor = ([segment["corpus_speaker"] for segment in row["segments"]] for row in summary.rows)
    assert conversation[0] == conversation[-1] != conversation[1]  # reader A, B, A again: two people
    assert set(reader_a) == {conversation[0]} and set(reader_b) == {conversation[1]}
    assert set(impostor).isdisjoint(conversation)

    people = json.loads((out / "speakers.json").read_text())
    assert [person["speaker"] for person in people] == ["PERSON_00", "PERSON_01", "PERSON_02"]
    assert [person["files"] for person in people] == [2, 2, 1]
    assert people[0]["paths"] == [inputs[0], inputs[1]] and people[2]["paths"] == [inputs[3]]
    assert all(person["example"]["path"] in person["paths"] for person in people)  # where they speak most
    assert lines[-1].endswith(f"; 3 people across the files ({out / 'speakers.json'})")
    parquet = pq.read_table(out / "results.parquet").to_pylist()
    assert [[segment["corpus_speaker"] for segment in row["segments"]] for row in parquet] == [
        [segment["corpus_speaker"] for segment in row["segments"]] for row in summary.rows]

    journal = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text(journal[1] + "\n")  # as if killed after one file (the conversation not done)
    resumed = run_batch(inputs, out, settings, {"language": "en"}, OPTIONS, report=lambda _: None)
    assert (resumed.skipped, resumed.done) == (1, 3)
    assert json.loads((out / "speakers.json").read_text()) == people
    assert [row["segments"] for row in resumed.rows] == [row["segments"] for row in summary.rows]

    # Unlinked, and who-spoke-when only (task=diarize): the rows hold the speaker timeline (they held nothing).
    unlinked = run_batch(inputs[:1], tmp_path / "plain", settings, {"task": "diarize"},
                         BatchOptions(workers=1, cpus_per_worker=1, link_speakers=False), report=lambda _: None)
    (row,) = unlinked.rows
    assert row["speaker_embeddings"] is None and row["text"] == ""
    speakers = [segment["speaker"] for segment in row["segments"]]  # reader A, B, A again
    assert speakers[0] == speakers[-1] == "SPEAKER_00" and set(speakers) == {"SPEAKER_00", "SPEAKER_01"}
    assert all(segment["corpus_speaker"] is None and segment["text"] == "" for segment in row["segments"])
    assert not (tmp_path / "plain" / "speakers.json").exists()
