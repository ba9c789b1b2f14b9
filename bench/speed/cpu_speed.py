"""CPU speed side by side: this project's CPU default against faster-whisper and the bare
transformers pipeline, on the same Whisper weights and audio, with and without diarization.

    python bench/speed/cpu_speed.py --fw-python /path/to/venv-with-faster-whisper/bin/python [--asr-model whisper-base] [--manifest ../shared/dev-audio/manifest.json] [--minutes 10] [--runs 3] [--systems ours fw-int8-batched ...] [--fw-wait-policy passive] [--out bench-results/cpu-speed]

How it measures, and what it reports: bench/README.md, ``cpu_speed.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.results import Table
from bench.speed.long_form import DEV_AUDIO, Worker, _peak_rss_mb, benchmark_files

OURS = ("ours", "ours-without-bf16", "ours-fp32", "ours+diarization", "ours-parts")
FASTER_WHISPER = ("fw-int8", "fw-fp32", "fw-int8-batched", "fw-int8-batched-timestamps", "fw-int8-batched-words", "whisperx-style")
DIARIZED = ("ours+diarization", "ours-parts", "whisperx-style")
SYSTEMS = (*OURS, "transformers", *FASTER_WHISPER)
SHORT_CLIP = "librivox_sense_and_sensibility_01_austen_64kb-0870.wav"
CONVERSATION = "conv01_standup_2spk.wav"
BATCH = 8


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fw-python", type=Path, help="a Python with faster-whisper installed (else its rows are left out)")
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--manifest", type=Path, default=DEV_AUDIO / "manifest.json")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS), help="the rows to run (default: all)")
    parser.add_argument("--fw-wait-policy", choices=("passive", "default"), default="passive",
                        help="OpenMP wait policy of the faster-whisper workers: ours (passive) or OpenMP's own default")
    parser.add_argument("--out", type=Path, default=Path("bench-results/cpu-speed"))
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--model-path", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _answer(**fields: Any) -> None:
    print(json.dumps({**fields, "rss_mb": _peak_rss_mb()}), flush=True)


def faster_whisper_worker(system: str, ct2_folder: Path) -> None:
    """Runs under ``--fw-python``: imports nothing of this project."""
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    model = WhisperModel(str(ct2_folder), device="cpu", compute_type="float32" if system == "fw-fp32" else "int8",
                         cpu_threads=os.cpu_count() or 0)
    batched = BatchedInferencePipeline(model) if system.startswith("fw-int8-batched") else None
    _answer(ready=True)
    for line in sys.stdin:
        samples = np.load(json.loads(line)["path"])
        started = time.perf_counter()
        if batched is not None:
            segments, _ = batched.transcribe(samples, language="en", beam_size=1, batch_size=BATCH, **_batched_options(system))
        else:
            segments, _ = model.transcribe(samples, language="en", beam_size=1)
        text = " ".join(segment.text.strip() for segment in segments)  # the generator decodes as it is read
        _answer(seconds=time.perf_counter() - started, text=text)


def _batched_options(system: str) -> dict[str, bool]:
    """faster-whisper batched as it defaults (its VAD pieces are its segments, no timestamp
    tokens), with Whisper's timestamp tokens (our default output), or with word times too."""
    if system == "fw-int8-batched":
        return {}
    return {"without_timestamps": False, "word_timestamps": system != "fw-int8-batched-timestamps"}


def whisperx_style_worker(ct2_folder: Path, asr_model: str) -> None:
    """whisperX's recipe on the same models: faster-whisper batched int8 with word times, then the
    embedded diarization, then this project's word attribution, one after the other as whisperX
    runs them. Needs a Python with faster-whisper and this project installed."""
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models import registry
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.diarization import diarize, group_by_speaker, load_diarization_pipeline, word_speakers
    from speaker_transcripts.pipeline.transcript import Chunk

    batched = BatchedInferencePipeline(WhisperModel(str(ct2_folder), device="cpu", compute_type="int8", cpu_threads=os.cpu_count() or 0))
    settings = registry.prepare(ModelSettings(asr_model=asr_model, diarization_model="pyannote-campplus"))
    pipeline = load_diarization_pipeline(settings, "cpu")
    _answer(ready=True)
    for line in sys.stdin:
        samples = np.load(json.loads(line)["path"])
        started = time.perf_counter()
        segments, _ = batched.transcribe(samples, language="en", beam_size=1, batch_size=BATCH, **_batched_options("fw-int8-batched-words"))
        words = [Chunk(word.word, word.start, word.end) for segment in segments for word in segment.words or []]
        asr_s = time.perf_counter() - started
        found = diarize(pipeline, samples, SAMPLING_RATE, {})
        speakers = group_by_speaker(words, word_speakers(words, found.turns))
        seconds = time.perf_counter() - started
        _answer(seconds=seconds, text="".join(word.text for word in words).strip(), asr_words_s=asr_s,
                diarization_s=seconds - asr_s, speakers=len({segment.speaker for segment in speakers}))


def transformers_worker(model_folder: Path) -> None:
    import torch
    from transformers import pipeline

    recognizer = pipeline("automatic-speech-recognition", model=str(model_folder), dtype=torch.float32, device="cpu")
    _answer(ready=True)
    for line in sys.stdin:
        samples = np.load(json.loads(line)["path"])
        started = time.perf_counter()
        with torch.inference_mode():
            result = recognizer(
                {"raw": samples, "sampling_rate": 16000}, chunk_length_s=30, batch_size=BATCH, return_timestamps=True,
                generate_kwargs={"num_beams": 1, "do_sample": False, "language": "en", "task": "transcribe"},
                ignore_warning=True,
            )
        _answer(seconds=time.perf_counter() - started, text=result["text"].strip())


def handler_worker(system: str, asr_model: str) -> None:
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models.cpu_fast_path import speed_up_for_cpu
    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.diarization import diarize
    from speaker_transcripts.pipeline.transcriber import Transcriber

    diarized = system == "ours+diarization"
    settings = ModelSettings(
        asr_model=asr_model,
        diarization_model="pyannote-campplus" if system in ("ours+diarization", "ours-parts") else None,
        dtype="float32" if system in ("ours-fp32", "ours-without-bf16") else "auto",
    )
    handler = Transcriber(settings=settings)
    if system == "ours-without-bf16":
        handler.recognizer.precision = ", ".join(speed_up_for_cpu(handler.recognizer.model, bfloat16=False))
    _answer(ready=True, precision=handler.recognizer.precision)
    for line in sys.stdin:
        request = json.loads(line)
        samples = np.load(request["path"])
        inputs = {"array": samples, "sampling_rate": SAMPLING_RATE}
        started = time.perf_counter()
        if system == "ours-parts":
            diarize(handler.diarization_pipeline, samples, SAMPLING_RATE, {})
            diarization_s = time.perf_counter() - started
            started = time.perf_counter()
            result = handler({"inputs": inputs, "parameters": {"language": "en", "diarize": False, "return_timestamps": "word"}})
            asr_words_s = time.perf_counter() - started
            _answer(seconds=diarization_s + asr_words_s, text=result["text"], diarization_s=diarization_s, asr_words_s=asr_words_s)
            continue
        result = handler({"inputs": inputs, "parameters": {"language": "en", "diarize": diarized}})
        _answer(seconds=time.perf_counter() - started, text=result["text"])


def ct2_conversion(model_folder: Path, destination: Path) -> Path:
    """The same weights in CTranslate2's format (float32; faster-whisper quantises at load)."""
    if not (destination / "model.bin").is_file():
        converter = Path(sys.executable).with_name("ct2-transformers-converter")
        subprocess.run([str(converter), "--model", str(model_folder), "--output_dir", str(destination), "--force",
                        "--copy_files", "tokenizer.json", "preprocessor_config.json"], check=True, capture_output=True)
    return destination


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if arguments.worker == "whisperx-style":
        whisperx_style_worker(arguments.model_path, arguments.asr_model)
        return 0
    if arguments.worker in FASTER_WHISPER:
        faster_whisper_worker(arguments.worker, arguments.model_path)
        return 0
    if arguments.worker == "transformers":
        transformers_worker(arguments.model_path)
        return 0
    if arguments.worker:
        handler_worker(arguments.worker, arguments.asr_model)
        return 0
    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.evaluation.scoring import english_normaliser, word_errors, words_of
    from speaker_transcripts.models import registry as models

    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs the dev audio (../shared/dev-audio)", file=sys.stderr)
        return 2
    model_folder = Path(models.prepare(ModelSettings(asr_model=arguments.asr_model, diarization_model=None)).asr_model)
    files, _ = benchmark_files(arguments.manifest, arguments.out, arguments.minutes)

    commands: dict[str, list[str]] = {}
    environments: dict[str, dict[str, str]] = {}
    for system in arguments.systems:
        base = ["--worker", system, "--asr-model", arguments.asr_model]
        if system in FASTER_WHISPER:
            if arguments.fw_python is None:
                continue
            ct2 = ct2_conversion(model_folder, arguments.out / f"ct2-{Path(arguments.asr_model).name}")
            commands[system] = [str(arguments.fw_python), __file__, *base, "--model-path", str(ct2)]
            environments[system] = _openmp_environment(arguments.fw_wait_policy)
        else:
            commands[system] = [sys.executable, __file__, *base, "--model-path", str(model_folder)]
    workers = {system: Worker(command, environments.get(system)) for system, command in commands.items()}
    diarized_files = {SHORT_CLIP, CONVERSATION, "long"}
    timings: dict[tuple[str, str], list[dict[str, float]]] = {}
    texts: dict[tuple[str, str], str] = {}
    peaks: dict[str, float] = {}
    try:
        for run in range(arguments.runs):
            for name, (path, _, _) in files.items():
                for system, worker in workers.items():  # interleaved: each file by every system in turn
                    if system in DIARIZED and name not in diarized_files:
                        continue
                    answer = worker.run(path)
                    timings.setdefault((system, name), []).append(
                        {key: value for key, value in answer.items() if key.endswith("_s") or key == "seconds"}
                    )
                    texts[(system, name)] = answer["text"]
                    peaks[system] = answer["rss_mb"]
            print(f"run {run + 1}/{arguments.runs} done", file=sys.stderr)
    finally:
        for worker in workers.values():
            worker.close()

    normalise = english_normaliser()
    report: dict[str, Any] = {"long_minutes": files["long"][2] / 60, "runs": arguments.runs,
                              "fw_wait_policy": arguments.fw_wait_policy, "systems": {}}
    for system, worker in workers.items():
        per_file: dict[str, Any] = {}
        dev_total = None
        for name, (_, text, duration) in files.items():
            if (system, name) not in texts:
                continue
            counts = word_errors(words_of(text, normalise), words_of(texts[(system, name)], normalise))
            if name != "long":
                dev_total = counts if dev_total is None else dev_total + counts
            medians = {key: statistics.median(run[key] for run in timings[(system, name)]) for key in timings[(system, name)][0]}
            per_file[name] = {"wer": counts.rate, "rtf": medians["seconds"] / duration, "duration_s": duration, **medians}
        report["systems"][system] = {
            "dev_wer": dev_total.rate if dev_total is not None and system not in DIARIZED else None,
            "peak_rss_mb": peaks[system],
            "loaded_rss_mb": worker.loaded_rss_mb,
            "files": per_file,
        }
    (arguments.out / "results.json").write_text(json.dumps(report, indent=2))
    _table(report).save(arguments.out)  # printed a row at a time
    return 0


def _openmp_environment(policy: str) -> dict[str, str]:
    """This process's environment with OpenMP's wait policy ``passive`` (the package set it here when
    it was imported, unless the user had set one) or unset (``default``: OpenMP's own)."""
    environment = {name: value for name, value in os.environ.items() if name != "OMP_WAIT_POLICY"}
    if policy == "passive":
        environment["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
    return environment


def _table(report: dict[str, Any]) -> Table:
    table = Table.of_headers("cpu-speed", (
        "system", "dev WER", "short clip RTF", "1-min RTF (s)", "10-min RTF (s)", "10-min WER", "peak RSS MB",
        "diarization / ASR+words s (1 min)"))
    for system, data in report["systems"].items():
        files = data["files"]
        short, conversation, long = files.get(SHORT_CLIP), files.get(CONVERSATION), files.get("long")
        parts = (f"{conversation['diarization_s']:.1f} / {conversation['asr_words_s']:.1f}"
                 if conversation and "diarization_s" in conversation else "")
        dev_wer = "" if data["dev_wer"] is None else f"{data['dev_wer']:.1%}"
        table.add_cells(
            system, dev_wer, f"{short['rtf']:.3f}", f"{conversation['rtf']:.3f} ({conversation['seconds']:.1f})",
            f"{long['rtf']:.3f} ({long['seconds']:.0f})", f"{long['wer']:.1%}", f"{data['peak_rss_mb']:.0f}", parts)
    return table


if __name__ == "__main__":
    sys.exit(main())
