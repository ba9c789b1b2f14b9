"""The same person, one label across a corpus: each file's speakers (their voice embeddings, as the
diarization pipeline found them) clustered across files into corpus speakers.

Two speakers of one file are two people, so a file's speakers are placed together, each in a
different corpus speaker (cannot-link): an assignment (Hungarian method) between the file's speakers
and the corpus speakers so far, where "a new person" is worth the threshold. Files are placed in input
order, then placed again against the others' centroids until nothing moves (``passes``), which removes
most of the dependence on order. Cost grows with files x corpus speakers, never files squared
(docs/quality.md, Speakers across a corpus).

A speaker the voice library named keeps its name as its label, and two names are never merged; the
others are ``PERSON_00``, ``PERSON_01``, ... in order of first appearance, so a resumed job labels as
an uninterrupted one would. Pure numpy and scipy: no model, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

ANONYMOUS = re.compile(r"SPEAKER_\d+")  # the diarization's own labels; anything else is a name
LABEL = "PERSON_{:02d}"
FORBIDDEN = -1e9  # an assignment that may not be made (a finite stand-in: the solver needs one)


@dataclass(frozen=True)
class LinkingParameters:
    """Hyper-parameters, chosen by ``bench/batch/corpus_linking.py`` (docs/quality.md "Speakers across a corpus")."""

    # Cosine similarity between a file's speaker and a corpus speaker's centroid from which they are one person.
    # On the AMI excerpts the same participant in two excerpts scored 0.61-0.82 (where both excerpts held enough
    # of their speech) and different people at most 0.50 (0.54 for two synthetic voices).
    threshold: float = 0.58
    passes: int = 5  # placing every file again until nothing moves, at most this many times
    max_weight_seconds: float = 60.0  # a speaker's weight in a centroid: their speech, up to this


@dataclass(frozen=True)
class FileSpeaker:
    """One speaker of one file: what linking needs of it."""

    file: int  # the file's position in the input order
    label: str  # the file's own label: SPEAKER_00, ..., or a name from the voice library
    embedding: np.ndarray
    speech_seconds: float

    @property
    def name(self) -> str | None:
        """The library's (or a clip's) name for this voice; None for an anonymous label."""
        return None if ANONYMOUS.fullmatch(self.label) else self.label


class _People:
    """The corpus speakers while they are being built, as arrays (thousands of people, files placed one
    at a time): each person's weighted sum of its members' unit embeddings, member count and name."""

    def __init__(self, dimension: int, capacity: int) -> None:
        self.totals = np.zeros((capacity, dimension), dtype=np.float32)
        self.norms = np.zeros(capacity, dtype=np.float32)  # kept with the totals: one file's look-up reads each row once
        self.counts = np.zeros(capacity, dtype=np.int64)
        self.named = np.zeros(capacity, dtype=bool)  # as an array: a named speaker's row is masked in one step
        self.names: list[str | None] = []
        self.by_name: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.names)

    def similarity(self, vectors: np.ndarray) -> np.ndarray:
        """Cosine similarity of each vector with each person's centroid."""
        return (vectors @ self.totals[: len(self)].T) / np.maximum(self.norms[: len(self)], 1e-12)

    def add(self, number: int, vector: np.ndarray, weight: float, name: str | None) -> None:
        self.totals[number] += weight * vector
        self.norms[number] = np.linalg.norm(self.totals[number])
        self.counts[number] += 1
        if name is not None:
            self.names[number] = name
            self.named[number] = True
            self.by_name[name] = number

    def remove(self, number: int, vector: np.ndarray, weight: float) -> None:
        self.totals[number] -= weight * vector
        self.counts[number] -= 1
        if self.counts[number] == 0:
            self.totals[number] = 0.0  # no rounding residue left to attract anyone
        self.norms[number] = np.linalg.norm(self.totals[number])

    def new(self, name: str | None) -> int:
        """A person for a speaker nobody matches: an emptied anonymous one when there is one, else a new row."""
        if name is None:
            empty = np.flatnonzero(self.counts[: len(self)] == 0)
            for number in empty:
                if self.names[number] is None:
                    return int(number)
        if len(self) == len(self.counts):  # grow by half
            extra = max(len(self.counts) // 2, 16)
            self.totals = np.vstack([self.totals, np.zeros((extra, self.totals.shape[1]), dtype=self.totals.dtype)])
            self.norms, self.counts, self.named = (np.concatenate([array, np.zeros(extra, dtype=array.dtype)])
                                                   for array in (self.norms, self.counts, self.named))
        self.names.append(name)
        return len(self) - 1


def link_speakers(items: Sequence[FileSpeaker], parameters: LinkingParameters = LinkingParameters()) -> list[str]:
    """The corpus label of each item (same order): see the module docstring."""
    if not items:
        return []
    vectors = np.stack([_unit(item.embedding) for item in items]).astype(np.float32)
    weights = np.array([min(max(item.speech_seconds, 1.0), parameters.max_weight_seconds) for item in items])
    names = [item.name for item in items]
    by_file: dict[int, list[int]] = {}
    for index, item in enumerate(items):
        by_file.setdefault(item.file, []).append(index)
    files = [by_file[file] for file in sorted(by_file)]
    people = _People(vectors.shape[1], capacity=max(16, len(items) // 2))
    placed = np.full(len(items), -1, dtype=np.int64)
    for members in files:
        _place(members, names, vectors, weights, people, placed, parameters.threshold)
    for _ in range(parameters.passes):
        before = placed.copy()
        for members in files:
            for index in members:  # out of its person while its file is placed again
                people.remove(int(placed[index]), vectors[index], weights[index])
            _place(members, names, vectors, weights, people, placed, parameters.threshold)
        if np.array_equal(placed, before):
            break
    return _labels(items, placed, people)


def _place(
    members: list[int],
    names: list[str | None],
    vectors: np.ndarray,
    weights: np.ndarray,
    people: _People,
    placed: np.ndarray,
    threshold: float,
) -> None:
    """One file's speakers into distinct people: the assignment that maximises the summed similarity,
    where a speaker below ``threshold`` with every person starts a new one (each its own)."""
    known = _scores(members, names, vectors, people, threshold)
    fresh = np.full((len(members), len(members)), FORBIDDEN)
    np.fill_diagonal(fresh, threshold)
    rows, columns = linear_sum_assignment(np.hstack([known, fresh]), maximize=True)
    for row, column in zip(rows, columns):
        index = members[row]
        number = int(column) if column < known.shape[1] else people.new(names[index])
        people.add(number, vectors[index], weights[index], names[index])
        placed[index] = number


def _scores(members: list[int], names: list[str | None], vectors: np.ndarray, people: _People, threshold: float) -> np.ndarray:
    """What placing each speaker in each person is worth: the similarity (below the threshold it loses
    to the speaker's own "new person" column); one name is one person (above any similarity), two names
    never are, and a person with no members (emptied while its file is placed again) is open to its name only."""
    if not len(people):
        return np.zeros((len(members), 0))
    scores = people.similarity(vectors[members]).astype(np.float64)
    scores[:, people.counts[: len(people)] == 0] = FORBIDDEN
    for row, index in enumerate(members):
        if names[index] is None:
            continue
        scores[row, people.named[: len(people)]] = FORBIDDEN
        if names[index] in people.by_name:
            scores[row, people.by_name[names[index]]] = 2.0 + threshold
    return scores


def _labels(items: Sequence[FileSpeaker], placed: np.ndarray, people: _People) -> list[str]:
    """Names for the named people, PERSON_nn for the others in order of first appearance (skipping any
    label a name already holds)."""
    taken = {name for name in people.names if name is not None}
    label_of: dict[int, str] = {}
    counter = 0
    for index in sorted(range(len(items)), key=lambda position: (items[position].file, position)):
        number = int(placed[index])
        if number in label_of:
            continue
        if people.names[number] is not None:
            label_of[number] = people.names[number]
            continue
        while LABEL.format(counter) in taken:
            counter += 1
        label_of[number] = LABEL.format(counter)
        counter += 1
    return [label_of[int(number)] for number in placed]


def _unit(vector: np.ndarray) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float64)
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def link_rows(rows: list[dict[str, Any]], parameters: LinkingParameters = LinkingParameters()) -> list[dict[str, Any]]:
    """Link the speakers of a job's rows (input order): every segment gets its ``corpus_speaker`` (None
    where its file has no voice for it: an error row, a speaker with no embedding), and the corpus
    speakers come back as the ``speakers.json`` summary (``speaker``, ``files``, ``speech_seconds``,
    ``example``: the longest segment of the person where they speak most, ``paths``)."""
    items: list[FileSpeaker] = []
    for position, row in enumerate(rows):
        for voice in row.get("speaker_embeddings") or []:
            items.append(FileSpeaker(position, voice["speaker"], np.asarray(voice["embedding"], dtype=np.float32),
                                     voice["speech_seconds"]))
    labels = link_speakers(items, parameters)
    corpus_label = {(item.file, item.label): label for item, label in zip(items, labels)}
    for position, row in enumerate(rows):
        for segment in row.get("segments") or []:
            segment["corpus_speaker"] = corpus_label.get((position, segment.get("speaker")))
    return _summary(rows, items, labels)


def _summary(rows: list[dict[str, Any]], items: list[FileSpeaker], labels: list[str]) -> list[dict[str, Any]]:
    people: dict[str, dict[str, Any]] = {}
    loudest: dict[str, FileSpeaker] = {}
    for item, label in zip(items, labels):
        person = people.setdefault(label, {"speaker": label, "files": 0, "speech_seconds": 0.0, "example": None, "paths": []})
        person["files"] += 1
        person["speech_seconds"] += item.speech_seconds
        person["paths"].append(rows[item.file]["path"])
        if label not in loudest or item.speech_seconds > loudest[label].speech_seconds:
            loudest[label] = item
    for label, item in loudest.items():
        own = [segment for segment in rows[item.file].get("segments") or [] if segment.get("speaker") == item.label]
        if own:
            longest = max(own, key=lambda segment: segment["end"] - segment["start"])
            people[label]["example"] = {"path": rows[item.file]["path"], "start": longest["start"], "end": longest["end"]}
        people[label]["speech_seconds"] = round(people[label]["speech_seconds"], 3)
    return list(people.values())


def file_voices(answer: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A file's speakers as a row keeps them for linking, in the order they are first heard: label,
    seconds of speech (the speaker timeline's), embedding (5 decimals: the row stays small and the
    similarity moves by < 1e-4)."""
    embeddings = (answer.get("speaker_embeddings") or {}).get("speakers")
    if embeddings is None:
        return None
    speech: dict[str, float] = {}
    first: dict[str, float] = {}
    for turn in answer.get("diarization") or []:
        speech[turn["speaker"]] = speech.get(turn["speaker"], 0.0) + turn["end"] - turn["start"]
        first.setdefault(turn["speaker"], turn["start"])
    in_order = sorted(embeddings, key=lambda label: first.get(label, float("inf")))  # first heard, first numbered
    return [{"speaker": label, "speech_seconds": round(speech.get(label, 0.0), 3),
             "embedding": [round(float(value), 5) for value in embeddings[label]]} for label in in_order]
