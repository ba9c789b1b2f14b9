"""The evaluation harness: transcripts and speaker attribution scored on a manifest, through the
real orchestrator (``speaker-transcripts evaluate``, ``cli/evaluate.py``, runs it).

For every manifest entry the handler runs twice (word-level and segment-level attribution) and,
once it is released, the bare transformers pipeline twice (word and segment timestamps) on the same
16 kHz samples with the same greedy settings. Reported: WER after Whisper's English normalisation
and word counts, handler against bare pipeline; with speaker turns (``--oracle-rttm`` feeds the
reference RTTM through the diarization seam, ``--diarization-model`` runs pyannote) the share of
reference words given the right speaker and cpWER; with a diarization model, DER (no collar and
±0.25 s, with its parts), the speakers found, and each stage's seconds; seconds per handler run.
Results go to ``--out`` as ``results.json`` and ``results.md``; docs/quality.md shows them.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Iterator
from typing import Any

from speaker_transcripts.evaluation.scoring import (
    Counts,
    DiarizationTotals,
    ManifestEntry,
    annotation_of,
    attribution,
    cp_word_errors,
    english_normaliser,
    word_errors,
    words_of,
)

MODES = ("word", "segment")


class Evaluation:
    """The handler and an independent bare pipeline over the same model, scored side by side.

    The two hold a Whisper each, and never at once: the handler runs every entry first (``run``),
    then ``add_bare`` releases it and loads the bare pipeline (one copy of Whisper in memory at a
    time; holding both, and the diarization pipeline, took `evaluate` on four files to 4.4 GB)."""

    def __init__(self, arguments: argparse.Namespace) -> None:
        from speaker_transcripts.config import ModelSettings
        from speaker_transcripts.pipeline.transcriber import Transcriber

        os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
        settings = ModelSettings(
            asr_model=arguments.asr_model,
            assistant_model=arguments.assistant_model,
            diarization_model=arguments.diarization_model,
        )
        self.handler: Any = Transcriber(settings=settings)
        self.model_pipeline = self.handler.diarization_pipeline
        self.diarization_totals: dict[str, DiarizationTotals] = {}  # by manifest kind
        self.oracle = arguments.oracle_rttm
        self.assisted = arguments.assistant_model is not None
        self.default_language = arguments.language
        self.long_form = arguments.long_form
        recognizer = self.handler.recognizer
        self.bare_model = (self.handler.settings.asr_model, recognizer.device, recognizer.dtype)
        self.multilingual = recognizer.capabilities.multilingual
        tokenizer = recognizer.processor.tokenizer
        self.normalise = english_normaliser(getattr(tokenizer, "english_spelling_normalizer", None))

    def run(self, entry: ManifestEntry) -> dict[str, Any]:
        """The entry's row: diarization scores and both handler runs (``add_bare`` adds the rest)."""
        from speaker_transcripts.pipeline.audio import SAMPLING_RATE, decode_file

        data = entry.audio.read_bytes()
        samples = decode_file(data).samples
        language = entry.language or self.default_language
        reference = words_of(entry.text, self.normalise)
        row: dict[str, Any] = {"file": entry.name, "duration_s": round(len(samples) / SAMPLING_RATE, 2), "reference_words": len(reference)}
        diarized, diarization = self._prepare_diarization(entry, samples, row["duration_s"])
        if diarization is not None:
            row["diarization"] = diarization
        for mode in MODES:
            parameters = {"language": language, "return_timestamps": "segment", "assisted": self.assisted, "long_form": self.long_form}
            if self.assisted:
                parameters["batch_size"] = 1
            if diarized:
                parameters["attribution"] = mode
            else:
                parameters["diarize"] = False
                parameters["return_timestamps"] = mode  # the same ASR work as the diarized run would do
            started = time.perf_counter()
            result = self.handler({"inputs": data, "parameters": parameters})
            seconds = time.perf_counter() - started
            scores = {**self._asr_scores(reference, result["text"]), "seconds": round(seconds, 2)}
            if diarized and entry.speaker_texts:
                scores.update(self._speaker_scores(entry, result))
            row[f"handler_{mode}"] = scores
        return row

    def add_bare(self, entries: list[ManifestEntry], rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Release the handler's models, load the bare pipeline, and add its runs to each entry's
        row (yielded as each is done, for progress)."""
        from transformers import pipeline

        from speaker_transcripts.pipeline.asr import encoder_for_word_timing, quiet_loading
        from speaker_transcripts.pipeline.audio import as_float32, decode_file
        from speaker_transcripts.pipeline.heap import return_freed_memory

        self.handler = self.model_pipeline = None
        gc.collect()  # the handler's models sit in reference cycles (modules and their hooks)
        return_freed_memory()
        model, device, dtype = self.bare_model
        with quiet_loading():  # without transformers' bars, as the handler's models load
            self.bare = pipeline("automatic-speech-recognition", model=model, device=device, dtype=dtype)
        # Word timestamps make transformers keep the encoder's self-attention maps too (432 MB a 30-s
        # piece for base) and switch it to eager attention, which builds them, though word alignment reads
        # only the decoder's: the handler's encoder keeps neither, and the bare pipeline's neither, the same
        # words (with the maps, `evaluate` on the dev files peaked at 4.5 GB; eager, at 2.55 GB)
        encoder_for_word_timing(self.bare.model)
        for entry, row in zip(entries, rows, strict=True):
            samples = as_float32(decode_file(entry.audio.read_bytes()).samples)  # what the handler's stages take
            reference = words_of(entry.text, self.normalise)
            for timestamps in MODES:
                started = time.perf_counter()
                bare_text = self._bare(samples, entry.language or self.default_language, timestamps)
                row[f"bare_{timestamps}"] = {**self._asr_scores(reference, bare_text), "seconds": round(time.perf_counter() - started, 2)}
            yield row

    def _bare(self, samples: Any, language: str, timestamps: str) -> str:
        import torch

        generate_kwargs: dict[str, Any] = {"num_beams": 1, "do_sample": False}
        if self.multilingual:
            generate_kwargs.update(language=language, task="transcribe")
        with torch.inference_mode():
            output = self.bare(
                {"raw": samples, "sampling_rate": 16000}, chunk_length_s=30, batch_size=1 if self.assisted else 24,
                return_timestamps="word" if timestamps == "word" else True, generate_kwargs=generate_kwargs,
                ignore_warning=True,  # the pipeline's "chunk_length_s is very experimental" paragraph
            )
        return output["text"]

    def _prepare_diarization(self, entry: ManifestEntry, samples: Any, duration: float) -> tuple[bool, dict[str, Any] | None]:
        """Point the seam at this entry's reference turns (oracle), or run the pipeline once,
        alone and timed, score it, and have the seam hand its output to both handler runs.
        Returns whether the handler runs diarize, and the diarization scores when a model ran."""
        from speaker_transcripts.pipeline.audio import SAMPLING_RATE
        from speaker_transcripts.pipeline.diarization import diarize

        if self.oracle:
            reference = annotation_of(entry.turns)
            self.handler.diarization_pipeline = (lambda audio, **hints: reference) if entry.turns else None
            return bool(entry.turns), None
        if self.model_pipeline is None:
            return False, None
        outputs: list[Any] = []

        def recorded(audio: Any, **hints: Any) -> Any:
            outputs.append(self.model_pipeline(audio, **hints))
            return outputs[-1]

        started = time.perf_counter()
        overlapping = diarize(recorded, samples, SAMPLING_RATE, {}).timeline  # DER scores overlapped speech too
        seconds = time.perf_counter() - started
        self.handler.diarization_pipeline = lambda audio, **hints: outputs[0]
        scores: dict[str, Any] = {
            "seconds": round(seconds, 2),
            "speakers": len({turn.speaker for turn in overlapping}),
            "reference_speakers": len({turn.speaker for turn in entry.turns}),
        }
        if entry.turns:
            totals = self.diarization_totals.setdefault(entry.kind, DiarizationTotals())
            scores.update({name: round(value, 4) for name, value in totals.add(entry.turns, overlapping, duration).items()})
        return True, scores

    def _asr_scores(self, reference: list[str], text: str) -> dict[str, Any]:
        hypothesis = words_of(text, self.normalise)
        counts = word_errors(reference, hypothesis)
        return {"errors": counts.errors, "wer": _rounded(counts.rate), "hypothesis_words": len(hypothesis)}

    def _speaker_scores(self, entry: ManifestEntry, result: dict[str, Any]) -> dict[str, Any]:
        hypothesis_words = [(word, s["speaker"]) for s in result["speakers"] for word in words_of(s["text"], self.normalise)]
        attributed = attribution(entry.reference_speaker_words(self.normalise), hypothesis_words)
        by_speaker: dict[str, list[str]] = {}
        for word, speaker in hypothesis_words:
            by_speaker.setdefault(speaker, []).append(word)
        cp = cp_word_errors(entry.reference_by_speaker(self.normalise), {s: " ".join(w) for s, w in by_speaker.items()})
        return {
            "attributed_correctly": attributed.correct,
            "attribution_accuracy": _rounded(attributed.accuracy),
            "cp_errors": cp.errors,
            "cp_length": cp.length,
            "cpwer": _rounded(cp.rate),
        }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall WER per system (speech files only) and totals for attribution and cpWER."""
    summary: dict[str, Any] = {}
    speech = [row for row in rows if row["reference_words"]]
    for system in ("bare_word", "bare_segment", "handler_word", "handler_segment"):
        total = sum((Counts(row[system]["errors"], row["reference_words"]) for row in speech), Counts(0, 0))
        summary[system] = {"wer": _rounded(total.rate), "errors": total.errors, "reference_words": total.length,
                           "hypothesis_words": sum(row[system]["hypothesis_words"] for row in rows)}
        attributed = [row[system] for row in rows if "attribution_accuracy" in row.get(system, {})]
        if attributed:
            correct = sum(scores["attributed_correctly"] for scores in attributed)
            words = sum(row["reference_words"] for row in rows if "attribution_accuracy" in row.get(system, {}))
            cp = sum((Counts(s["cp_errors"], s["cp_length"]) for s in attributed), Counts(0, 0))
            summary[system].update(attribution_accuracy=_rounded(correct / words if words else None), cpwer=_rounded(cp.rate))
    return summary


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any], diarization: dict[str, dict[str, float]] | None = None) -> str:
    header = ("| file | s | ref words | WER handler seg / bare seg | WER handler word / bare word | words handler / bare "
              "| attribution word / seg | cpWER word / seg | s word / seg |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for row in rows:
        word, segment = row["handler_word"], row["handler_segment"]
        lines.append(
            f"| {row['file']} | {row['duration_s']} | {row['reference_words']} "
            f"| {percent(segment['wer'])} / {percent(row['bare_segment']['wer'])} "
            f"| {percent(word['wer'])} / {percent(row['bare_word']['wer'])} "
            f"| {word['hypothesis_words']} / {row['bare_word']['hypothesis_words']} "
            f"| {percent(word.get('attribution_accuracy'))} / {percent(segment.get('attribution_accuracy'))} "
            f"| {percent(word.get('cpwer'))} / {percent(segment.get('cpwer'))} "
            f"| {word['seconds']} / {segment['seconds']} |"
        )
    lines.append("")
    lines.append("| overall | WER | errors / ref words | hyp words | attribution | cpWER |")
    lines.append("|---|---|---|---|---|---|")
    for system, scores in summary.items():
        lines.append(
            f"| {system} | {percent(scores['wer'])} | {scores['errors']} / {scores['reference_words']} | {scores['hypothesis_words']} "
            f"| {percent(scores.get('attribution_accuracy'))} | {percent(scores.get('cpwer'))} |"
        )
    if diarization:
        lines += ["", ("| diarization | speakers found / ref | DER | DER ±0.25 s collar | missed | false alarm | confusion "
                   "| s diarization / ASR alone |"), "|---|---|---|---|---|---|---|---|"]
        totals = [{"file": f"all {kind}", "diarization": scores} for kind, scores in diarization.items()]
        for row in [row for row in rows if "diarization" in row] + totals:
            scores = row["diarization"]
            speakers = f"{scores['speakers']} / {scores['reference_speakers']}" if "speakers" in scores else ""
            seconds = f"{scores['seconds']} / {row['bare_segment']['seconds']}" if "seconds" in scores else ""
            lines.append(
                f"| {row['file']} | {speakers} | {percent(scores.get('der'))} | {percent(scores.get('der_collar_0.25'))} "
                f"| {percent(scores.get('missed_detection'))} | {percent(scores.get('false_alarm'))} "
                f"| {percent(scores.get('confusion'))} | {seconds} |"
            )
    return "\n".join(lines) + "\n"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"

