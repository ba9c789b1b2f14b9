"""Scores for the evaluation harness: WER, speaker attribution, cpWER and DER, plus the manifest.

Pure functions on words and turns (no torch, no models), so each is tested on hand-made inputs
with known answers. Text is compared after Whisper's English normalisation (the normaliser
transformers ships), which maps case, punctuation, numbers and spelling variants to one form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jiwer
import numpy as np
from scipy.optimize import linear_sum_assignment

from speaker_transcripts.pipeline.diarization import Turn

Normaliser = Callable[[str], str]
SpeakerWord = tuple[str, str]  # (normalised word, speaker)


def english_normaliser(spelling: dict[str, str] | None = None) -> Normaliser:
    """Whisper's English text normaliser; ``spelling`` is the model's ``normalizer.json`` (British
    to American spellings), when it has one."""
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    return EnglishTextNormalizer(spelling or {})


def words_of(text: str, normalise: Normaliser) -> list[str]:
    return normalise(text).split()


@dataclass(frozen=True)
class Counts:
    """Errors over reference length; ``rate`` is ``None`` when there is nothing to score against."""

    errors: int
    length: int

    @property
    def rate(self) -> float | None:
        return self.errors / self.length if self.length else None

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.errors + other.errors, self.length + other.length)


def word_errors(reference: Sequence[str], hypothesis: Sequence[str]) -> Counts:
    """Substitutions + deletions + insertions against the reference length (jiwer's alignment)."""
    if not reference:
        return Counts(len(hypothesis), 0)
    if not hypothesis:
        return Counts(len(reference), len(reference))
    output = jiwer.process_words(" ".join(reference), " ".join(hypothesis))
    return Counts(output.substitutions + output.deletions + output.insertions, len(reference))


@dataclass(frozen=True)
class Attribution:
    """Reference words whose aligned hypothesis word carries the right speaker (after mapping)."""

    correct: int
    total: int
    aligned: int
    mapping: dict[str, str] = field(default_factory=dict)  # hypothesis label -> reference speaker
    right: tuple[bool, ...] = ()  # per reference word: attributed to its speaker (a subset's accuracy, e.g. overlapped turns)

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.total if self.total else None


def attribution(reference: Sequence[SpeakerWord], hypothesis: Sequence[SpeakerWord]) -> Attribution:
    """Align hypothesis words to reference words (Levenshtein, as WER does), then map hypothesis
    speaker labels to reference speakers one-to-one so that the most aligned words agree
    (Hungarian algorithm). A reference word deleted by ASR counts as wrongly attributed."""
    if not reference:
        return Attribution(0, 0, 0)
    pairs = _aligned_pairs([w for w, _ in reference], [w for w, _ in hypothesis])
    reference_speakers = sorted({speaker for _, speaker in reference})
    hypothesis_speakers = sorted({speaker for _, speaker in hypothesis})
    if not pairs or not hypothesis_speakers:
        return Attribution(0, len(reference), len(pairs))
    agreement = np.zeros((len(hypothesis_speakers), len(reference_speakers)), dtype=int)
    for reference_index, hypothesis_index in pairs:
        agreement[hypothesis_speakers.index(hypothesis[hypothesis_index][1]), reference_speakers.index(reference[reference_index][1])] += 1
    rows, columns = linear_sum_assignment(agreement, maximize=True)
    mapping = {hypothesis_speakers[row]: reference_speakers[column] for row, column in zip(rows, columns, strict=True)}
    right = [False] * len(reference)
    for r, h in pairs:
        right[r] = mapping.get(hypothesis[h][1]) == reference[r][1]
    return Attribution(sum(right), len(reference), len(pairs), mapping, tuple(right))


def named_attribution(reference: Sequence[SpeakerWord], hypothesis: Sequence[SpeakerWord]) -> Attribution:
    """As ``attribution``, with no mapping: a word is right only when its hypothesis speaker *is*
    the reference speaker's name (speakers named by enrolment, not numbered per file)."""
    pairs = _aligned_pairs([w for w, _ in reference], [w for w, _ in hypothesis])
    correct = sum(hypothesis[h][1] == reference[r][1] for r, h in pairs)
    return Attribution(correct, len(reference), len(pairs))


def cp_word_errors(reference: dict[str, str], hypothesis: dict[str, str]) -> Counts:
    """Concatenated minimum-permutation WER (meeteval): each speaker's words concatenated, speakers
    matched to minimise errors; a word given to the wrong speaker costs a deletion and an insertion."""
    from meeteval.wer.wer.cp import cp_word_error_rate

    if not any(text.split() for text in reference.values()):
        return Counts(sum(len(text.split()) for text in hypothesis.values()), 0)
    # plain per-speaker texts carry no times: say so, instead of meeteval warning it assumed as much
    result = cp_word_error_rate(
        reference=reference, hypothesis=hypothesis or {"none": ""}, reference_sort=False, hypothesis_sort=False
    )
    return Counts(result.errors, result.length)


# Seconds forgiven on each side of every reference boundary: none, and NIST md-eval's usual 0.25.
# pyannote.metrics' ``collar`` is the whole width centred on the boundary, so it gets twice that.
DER_COLLARS = (0.0, 0.25)


class DiarizationTotals:
    """DER per file and over all files (errors summed over all reference speech, as
    pyannote.metrics totals them), scored on ``[0, duration]`` with each of ``DER_COLLARS``."""

    def __init__(self) -> None:
        from pyannote.metrics.diarization import DiarizationErrorRate

        self.metrics = {collar: DiarizationErrorRate(collar=2 * collar) for collar in DER_COLLARS}

    def add(self, reference: Sequence[Turn], hypothesis: Sequence[Turn], duration: float) -> dict[str, float]:
        from pyannote.core import Segment, Timeline

        uem = Timeline([Segment(0.0, duration)])
        scores: dict[str, float] = {}
        for collar, metric in self.metrics.items():
            details = metric(annotation_of(reference), annotation_of(hypothesis), uem=uem, detailed=True)
            scores[_der_name(collar)] = float(details["diarization error rate"])
            if collar == 0.0:
                scores.update(_components(details))
        return scores

    def summary(self) -> dict[str, float]:
        scores: dict[str, float] = {}
        for collar, metric in self.metrics.items():
            scores[_der_name(collar)] = float(abs(metric))
            if collar == 0.0:
                scores.update(_components(metric[:]))
        return scores


def _der_name(collar: float) -> str:
    return "der" if collar == 0.0 else f"der_collar_{collar:g}"


def _components(details: dict[str, float]) -> dict[str, float]:
    total = details["total"] or 1.0
    return {name.replace(" ", "_"): details[name] / total for name in ("missed detection", "false alarm", "confusion")}


def annotation_of(turns: Sequence[Turn]) -> Any:
    from pyannote.core import Annotation, Segment

    annotation = Annotation()
    for index, turn in enumerate(turns):
        annotation[Segment(turn.start, turn.end), index] = turn.speaker
    return annotation


def _aligned_pairs(reference: Sequence[str], hypothesis: Sequence[str]) -> list[tuple[int, int]]:
    """(reference index, hypothesis index) of words aligned as equal or substituted."""
    if not reference or not hypothesis:
        return []
    output = jiwer.process_words(" ".join(reference), " ".join(hypothesis))
    pairs = []
    for chunk in output.alignments[0]:
        if chunk.type in ("equal", "substitute"):
            pairs.extend(zip(range(chunk.ref_start_idx, chunk.ref_end_idx), range(chunk.hyp_start_idx, chunk.hyp_end_idx), strict=True))
    return pairs


# --- the manifest ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestEntry:
    """One audio file with what is known about it: text, and speaker turns when annotated."""

    name: str
    audio: Path
    text: str
    turns: list[Turn]  # RTTM speaker turns (empty when not annotated)
    speaker_texts: list[tuple[str, str]]  # (speaker, text) per reference turn, in time order; empty if unknown
    language: str | None = None
    kind: str = "unknown"  # the manifest's kind: real_meeting, synthetic_conversation, ...

    def reference_speaker_words(self, normalise: Normaliser) -> list[SpeakerWord]:
        return [(word, speaker) for speaker, text in self.speaker_texts for word in words_of(text, normalise)]

    def reference_by_speaker(self, normalise: Normaliser) -> dict[str, str]:
        joined: dict[str, list[str]] = {}
        for speaker, text in self.speaker_texts:
            joined.setdefault(speaker, []).extend(words_of(text, normalise))
        return {speaker: " ".join(words) for speaker, words in joined.items()}


def load_manifest(path: Path) -> list[ManifestEntry]:
    """Entries of a manifest shaped like ``../shared/dev-audio/manifest.json``: a JSON list of
    ``{"audio", "text"?, "transcript"?, "transcript_format": "text"|"turns_json", "rttm"?, "language"?}``
    with paths relative to the manifest."""
    root = path.parent
    entries = []
    for item in json.loads(path.read_text()):
        turns = read_rttm(root / item["rttm"]) if item.get("rttm") else []
        speaker_texts: list[tuple[str, str]] = []
        text = item.get("text") or ""
        transcript = item.get("transcript")
        if transcript and item.get("transcript_format") == "turns_json":
            reference_turns = sorted(json.loads((root / transcript).read_text()), key=lambda turn: turn["start"])
            speaker_texts = [(turn["speaker"], turn["text"]) for turn in reference_turns]
            text = text or " ".join(turn_text for _, turn_text in speaker_texts)
        elif transcript and not text:
            text = (root / transcript).read_text().strip()
        entries.append(ManifestEntry(
            name=Path(item["audio"]).name, audio=root / item["audio"], text=text, turns=turns,
            speaker_texts=speaker_texts, language=item.get("language"), kind=item.get("kind") or "unknown",
        ))
    return entries


def read_rttm(path: Path) -> list[Turn]:
    """``SPEAKER <file> <channel> <start> <duration> <NA> <NA> <speaker> ...`` lines, in time order."""
    turns = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[0] == "SPEAKER":
            start, duration = float(fields[3]), float(fields[4])
            turns.append(Turn(speaker=fields[7], start=start, end=start + duration))
    return sorted(turns, key=lambda turn: (turn.start, turn.end))
