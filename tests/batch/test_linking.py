"""Speakers linked across a corpus (batch/linking.py), on synthetic voices: a voice is a random unit
direction, each file's copy of it that direction plus noise (similarity with its centre about 0.8)."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.batch.linking import FileSpeaker, LinkingParameters, file_voices, link_rows, link_speakers

DIMENSION = 192


def voices(count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((count, DIMENSION))
    return centres / np.linalg.norm(centres, axis=1, keepdims=True)


def heard(centre: np.ndarray, rng: np.random.Generator, similarity: float = 0.8) -> np.ndarray:
    """The voice as one file's diarization embeds it: about ``similarity`` with its centre."""
    noise = rng.standard_normal(DIMENSION)
    noise -= (noise @ centre) * centre
    noise /= np.linalg.norm(noise)
    return similarity * centre + np.sqrt(1 - similarity**2) * noise


def corpus(people_per_file: list[list[int]], centres: np.ndarray, seed: int = 1, label=None) -> list[FileSpeaker]:
    rng = np.random.default_rng(seed)
    return [
        FileSpeaker(file, (label or (lambda file, slot, person: f"SPEAKER_{slot:02d}"))(file, slot, person),
                    heard(centres[person], rng), 10.0)
        for file, people in enumerate(people_per_file) for slot, person in enumerate(people)
    ]


def persons(people_per_file: list[list[int]]) -> list[int]:
    return [person for people in people_per_file for person in people]


def same_partition(labels: list[str], truth: list[int]) -> bool:
    return all((labels[a] == labels[b]) == (truth[a] == truth[b]) for a in range(len(truth)) for b in range(len(truth)))


def test_the_same_person_gets_one_label_in_every_file_and_different_people_different_ones():
    files = [[0, 1], [1, 2], [0, 2, 3], [3], [4, 0]]
    labels = link_speakers(corpus(files, voices(5)))
    assert same_partition(labels, persons(files)), labels
    assert labels[:2] == ["PERSON_00", "PERSON_01"]  # numbered in order of first appearance


def test_two_speakers_of_one_file_are_never_merged_even_when_they_sound_alike():
    centres = voices(1)
    rng = np.random.default_rng(3)
    items = [FileSpeaker(0, "SPEAKER_00", heard(centres[0], rng, 0.95), 10.0),
             FileSpeaker(0, "SPEAKER_01", heard(centres[0], rng, 0.95), 10.0),
             FileSpeaker(1, "SPEAKER_00", heard(centres[0], rng, 0.95), 10.0)]
    labels = link_speakers(items)
    assert labels[0] != labels[1]
    assert labels[2] in labels[:2]


def test_voices_below_the_threshold_stay_apart():
    centres = voices(1)
    rng = np.random.default_rng(4)
    far = [FileSpeaker(file, "SPEAKER_00", heard(centres[0], rng, 0.6), 10.0) for file in range(2)]  # about 0.36 apart
    assert len(set(link_speakers(far))) == 2
    assert len(set(link_speakers(far, LinkingParameters(threshold=0.3)))) == 1


def test_the_order_of_files_changes_no_grouping():
    files = [[0, 1], [2, 1], [0, 3], [4], [3, 2], [1, 4]]
    items = corpus(files, voices(5))
    reversed_items = [FileSpeaker(len(files) - 1 - item.file, item.label, item.embedding, item.speech_seconds)
                      for item in items]
    assert same_partition(link_speakers(reversed_items), persons(files))
    assert same_partition(link_speakers(items), persons(files))


def test_a_library_name_labels_its_person_everywhere_and_two_names_are_never_one_person():
    files = [[0, 1], [0, 1], [0]]
    centres = voices(2)
    named = corpus(files, centres, label=lambda file, slot, person: "Alice" if (file, person) == (0, 0) else f"SPEAKER_{slot:02d}")
    labels = link_speakers(named)
    assert [labels[0], labels[2], labels[4]] == ["Alice"] * 3  # her unnamed voice in files 1 and 2 joins her
    assert labels[1] == labels[3] == "PERSON_00"

    rng = np.random.default_rng(5)
    twins = [FileSpeaker(0, "Ann", heard(centres[0], rng, 0.95), 5.0), FileSpeaker(1, "Bea", heard(centres[0], rng, 0.95), 5.0)]
    assert link_speakers(twins) == ["Ann", "Bea"]


def test_a_generated_label_never_takes_a_library_name():
    rng = np.random.default_rng(6)
    centres = voices(2)
    items = [FileSpeaker(0, "PERSON_00", heard(centres[0], rng), 5.0), FileSpeaker(0, "SPEAKER_01", heard(centres[1], rng), 5.0)]
    assert link_speakers(items) == ["PERSON_00", "PERSON_01"]


def test_thousands_of_files_link_right():
    """10,000 files of three speakers from 2,000 people, linked right (its speed is measured by
    bench/batch/corpus_linking.py --synthetic, not asserted here: a test never races the clock)."""
    rng = np.random.default_rng(7)
    files = [list(rng.choice(2000, size=3, replace=False)) for _ in range(10_000)]
    items = corpus(files, voices(2000), seed=8)
    labels = link_speakers(items, LinkingParameters(passes=1))
    truth = persons(files)
    first_label = {}
    agree = sum(first_label.setdefault(person, label) == label for person, label in zip(truth, labels))
    assert agree / len(truth) >= 0.99
    assert len(set(labels)) <= 2000 * 1.02


def test_rows_get_corpus_speakers_and_a_summary_people_can_listen_to():
    centres = voices(2)
    rng = np.random.default_rng(9)

    def row(path, labels_people):
        return {
            "path": path,
            "segments": [{"speaker": label, "start": float(n), "end": float(n) + 1.5 + n, "text": "x"}
                         for n, (label, _) in enumerate(labels_people)] + [{"speaker": "UNKNOWN", "start": 9.0, "end": 9.5, "text": "y"}],
            "speaker_embeddings": [{"speaker": label, "speech_seconds": 4.0, "embedding": list(heard(centres[person], rng))}
                                   for label, person in labels_people],
        }

    rows = [row("a.wav", [("SPEAKER_00", 0), ("SPEAKER_01", 1)]), row("b.wav", [("SPEAKER_00", 1)]),
            {"path": "broken.wav", "segments": [], "speaker_embeddings": None, "error": "cannot read"}]
    people = link_rows(rows)
    assert [segment["corpus_speaker"] for segment in rows[0]["segments"]] == ["PERSON_00", "PERSON_01", None]
    assert rows[1]["segments"][0]["corpus_speaker"] == "PERSON_01"
    assert people == [
        {"speaker": "PERSON_00", "files": 1, "speech_seconds": 4.0, "example": {"path": "a.wav", "start": 0.0, "end": 1.5},
         "paths": ["a.wav"]},
        {"speaker": "PERSON_01", "files": 2, "speech_seconds": 8.0, "example": {"path": "a.wav", "start": 1.0, "end": 3.5},
         "paths": ["a.wav", "b.wav"]},
    ]


@pytest.mark.parametrize("answer, expected", [
    ({"speakers": []}, None),
    ({"speaker_embeddings": {"speakers": {"SPEAKER_01": [0.5, 0.5], "SPEAKER_00": [0.1234567, 1.0]}},
      "diarization": [{"speaker": "SPEAKER_00", "start": 0.0, "end": 1.25}, {"speaker": "SPEAKER_01", "start": 1.0, "end": 1.5},
                      {"speaker": "SPEAKER_00", "start": 2.0, "end": 3.0}]},
     [{"speaker": "SPEAKER_00", "speech_seconds": 2.25, "embedding": [0.12346, 1.0]},
      {"speaker": "SPEAKER_01", "speech_seconds": 0.5, "embedding": [0.5, 0.5]}]),
])
def test_a_files_voices_are_kept_in_the_order_first_heard_with_their_speech_time(answer, expected):
    assert file_voices(answer) == expected
