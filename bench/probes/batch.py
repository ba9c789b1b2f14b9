"""The batch command over an odd corpus (FIFOs, names with newlines, symlink loops, a self-naming
manifest, two jobs on one ``--out``), and a corpus-linking job killed with SIGKILL and resumed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from probes.server import ROOT
from tests.audio_files import pcm_wav


def odd_corpus(asr_model: str, rng: random.Random, speech: np.ndarray) -> tuple[list[tuple], list[str]]:
    """The batch command on a corpus of many tiny files and odd inputs (a FIFO, a name with a newline
    and a tab, a symlink loop under a glob), while a second job is started on the same --out; and a
    manifest naming itself, which must be refused in a line before anything starts: (what, outcome)."""
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "corpus"
        (folder / "loop").mkdir(parents=True)
        os.symlink(folder / "loop", folder / "loop" / "again")
        (folder / "loop" / "inside.wav").write_bytes(pcm_wav(speech[:1600]))
        count = rng.randint(300, 600)
        tiny = pcm_wav(speech[: 1600])
        for index in range(count):
            (folder / f"short-{index:04d}.wav").write_bytes(tiny)
        (folder / "odd\nname\t.wav").write_bytes(tiny)
        os.mkfifo(folder / "pipe.wav")
        manifest = folder / "self.txt"
        manifest.write_text(f"{manifest}\n{folder / 'short-0000.wav'}\n")
        out = Path(scratch) / "out"
        options = ["--out", str(out), "--asr-model", asr_model, "--no-diarize", "--language", "en"]
        environment = {**os.environ, "DIARIZATION_MODEL": "none"}
        looping = subprocess.run([sys.executable, "-m", "speaker_transcripts", "batch", str(manifest), *options], check=False, cwd=ROOT,
                                 env=environment, capture_output=True, text=True, timeout=300)
        rows.append(("a manifest naming itself", (f"exit {looping.returncode}, {len(looping.stderr.splitlines())} line(s): "
                                                 f"{looping.stderr.strip()[-100:]}")))
        if looping.returncode != 2 or len(looping.stderr.splitlines()) > 2:
            failures.append(f"odd corpus: a manifest naming itself gave exit {looping.returncode} and {len(looping.stderr.splitlines())} lines")
        command = [sys.executable, "-m", "speaker_transcripts", "batch", str(folder), str(folder / "loop" / "**" / "*.wav"),
                   str(folder / "pipe.wav"), *options]
        started = time.monotonic()
        job = subprocess.Popen(command, cwd=ROOT, env=environment, stderr=subprocess.PIPE, text=True)
        first_row = None
        lines: list[str] = []
        second = None
        for line in job.stderr:
            lines.append(line)
            if first_row is None and line.startswith("[1/"):
                first_row = time.monotonic() - started
                second = subprocess.run(command, check=False, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
        job.wait(timeout=1800)
        written = (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").exists() else []
        tracebacks = sum("Traceback" in line for line in lines)
        rows += [("inputs listed", lines[0].strip() if lines else "nothing"), ("first row after", f"{first_row or float('inf'):.0f} s"),
                 ("rows written", len(written)), ("exit status", job.returncode), ("tracebacks", tracebacks),
                 ("second job on the same --out", f"exit {second.returncode}: {second.stderr.strip()[-120:]}" if second else "not started")]
        if job.returncode not in (0, 1) or tracebacks or first_row is None or first_row > 60:
            failures.append(f"odd corpus: exit {job.returncode}, {tracebacks} tracebacks, first row {first_row}")
        if second is None or second.returncode != 2:
            failures.append("odd corpus: a second job on the same --out was not refused")
    return rows, failures


ODD_NAMES = (" spaced  name", "ünïcödé 名前", "quote ' and \"", "-leading-dash", "newline\nin it", "tab\tin it", "#hash", "semi;colon",
             "$(dollar)", "back\\slash", "percent %20", "x" * 180)


def killed_and_resumed(asr_model: str, rng: random.Random, files: int = 1000) -> tuple[list[tuple], list[str]]:
    """The batch command, diarizing and linking speakers across ``files`` short clips of the two readers
    under odd names, killed with SIGKILL (the job's whole process group, Ray's processes with it) once a
    third of the rows are in, then run again on the same ``--out``: every file has exactly one row and no
    error, and ``speakers.json`` agrees with the rows' ``corpus_speaker`` labels."""
    import signal

    rows, failures = [], []
    clips = [(ROOT / "samples" / "enrolment" / name).read_bytes() for name in ("reader-a.wav", "reader-b.wav")]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "corpus"
        folder.mkdir()
        for index in range(files):
            (folder / f"{index:04d}{rng.choice(ODD_NAMES)}.wav").write_bytes(clips[index % 2])
        out = Path(scratch) / "out"
        command = [sys.executable, "-m", "speaker_transcripts", "batch", str(folder), "--out", str(out), "--asr-model", asr_model,
                   "--language", "en", "--diarization-model", "pyannote-campplus"]
        started = time.monotonic()
        job = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True)
        done = 0
        for line in job.stderr:
            if line.startswith("["):
                done += 1
                if done >= files // 3:
                    break
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=60)
        killed_after = time.monotonic() - started
        leftovers = subprocess.run(["pgrep", "-s", str(job.pid)], check=False, capture_output=True, text=True).stdout.split()
        for pid in leftovers:  # a process that left the group (Ray's daemons may): killed too, reported
            os.kill(int(pid), signal.SIGKILL)
        kept = len((out / "results.jsonl").read_text().splitlines()) if (out / "results.jsonl").exists() else 0
        resumed = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=7200)
        results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        paths = Counter(row["path"] for row in results)
        errors = [row["error"] for row in results if row["error"]]
        labels = Counter(segment.get("corpus_speaker") for row in results for segment in row["segments"])
        people = json.loads((out / "speakers.json").read_text())
        listed = {person["speaker"]: set(person["paths"]) for person in people}
        by_rows: dict[str, set[str]] = {}
        for row in results:
            for segment in row["segments"]:
                by_rows.setdefault(segment.get("corpus_speaker"), set()).add(row["path"])
        rows += [("files, odd names among them", files), ("killed after", f"{done} rows, {killed_after:.0f} s; {len(leftovers)} process(es) outside the group"),
                 ("rows on disk at the kill", kept), ("resume", f"exit {resumed.returncode}, {resumed.stderr.strip().splitlines()[-1][:100] if resumed.stderr.strip() else ''}"),
                 ("rows after the resume", f"{len(results)} for {len(paths)} paths, {sum(count > 1 for count in paths.values())} duplicated, {len(errors)} errors"),
                 ("people in speakers.json", f"{len(people)}: " + ", ".join(f"{p['speaker']} in {len(p['paths'])} files" for p in people)),
                 ("segments without a corpus_speaker", labels.get(None, 0))]
        if resumed.returncode != 0 or len(paths) != files or len(results) != files or errors:
            failures.append(f"killed and resumed batch: exit {resumed.returncode}, {len(results)} rows for {len(paths)} of {files} files, {len(errors)} errors")
        named_in_rows = {label: rows_of for label, rows_of in by_rows.items() if label}
        if any(not rows_of <= listed.get(label, set()) for label, rows_of in named_in_rows.items()) or \
                any(not listed_paths <= set(paths) for listed_paths in listed.values()):
            failures.append("killed and resumed batch: speakers.json and the rows' corpus_speaker labels disagree")
    return rows, failures
