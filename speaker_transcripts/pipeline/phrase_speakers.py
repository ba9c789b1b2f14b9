"""A second look at who spoke, from the transcript: a speaker whose phrases hold two voices is split.

pyannote's segmentation gives each 10-s chunk at most a few local speakers; when two people trade
turns of a second or two it can hear one voice where there are two, and no clustering threshold
separates what one chunk embedding mixes. The transcript knows better where one person's phrase begins
and ends. So each speaker's phrases (words between sentence ends and pauses, at most ``PHRASE_MAX_S``)
are embedded with the diarization's own model and cut in two by agglomerative clustering; when the
halves are further apart than the clustering threshold and each holds ``MIN_SIDE_S`` of speech, the
smaller one joins the speaker it sounds like, or becomes a new one (docs/quality.md, "A second look
from the transcript: the phrase check").

Only phrases move, and with them the speaker turns under them (``moved``): the answer's timeline,
turns, embeddings and words stay one story. Without word times, or a model to embed with, nothing
changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from speaker_transcripts.pipeline.diarization import MIN_TURN_S, Diarization, Turn, word_speakers
from speaker_transcripts.pipeline.transcript import Chunk, ends_sentence

PHRASE_PAUSE_S = 0.3  # a pause this long ends a phrase
PHRASE_MAX_S = 3.0  # longer runs are cut at a word: two quick turns run together otherwise (2 s split one reader in two)
PHRASE_MIN_S = 0.5  # shorter phrases are not embedded: too little voice for the embedding model
# Phrases per model call. CAM++'s activations, not its input, set the peak: 32 phrases of 3 s took
# +250 MB above the loaded model and 8 took +88 MB, in 2.0 s per 96 phrases against 3.0 s (one thread;
# issue 50: the last minute of a 3-hour request stepped up 0.35 GB at this stage with 32).
EMBEDDING_BATCH = 8
MIN_PHRASES = 4  # a speaker with fewer embedded phrases is not questioned
MAX_CLUSTERED = 2000  # phrases of one speaker clustered at most (an evenly spaced sample beyond: 2000 take 16 MB)
SPLIT_DISTANCE = 0.6  # cosine: the diarization's clustering threshold (models/pyannote_pipeline.py), the same judgement
MIN_SIDE_S = 3.0  # of phrase speech on each side of a split: a few odd phrases are not a person


@dataclass(frozen=True)
class Checked:
    """The check's answer: the diarization after it and, where diarization heard one voice, how far apart
    (cosine) the two halves of its embedded phrases lie (``spread``; None: several voices, or too few phrases
    to tell). One voice in a short recording is one person when its halves lie close, a quick exchange heard
    as one when they do not (the count warning, ``speaker_count.count_doubts``)."""

    diarization: Diarization
    spread: float | None = None


@dataclass(frozen=True)
class Phrase:
    """Words ``words`` (indices) of one speaker, from ``start`` to ``end`` seconds."""

    speaker: str
    words: range
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def checked(
    found: Diarization,
    words: Sequence[Chunk],
    samples: np.ndarray,
    sampling_rate: int,
    embed: Callable[[np.ndarray], np.ndarray],
    may_add: bool,
) -> Checked:
    """``found`` after the check: the words attributed as usual, cut into phrases, the phrases of
    ``PHRASE_MIN_S`` or more embedded with ``embed`` (the diarization's model, so one space), and
    the phrases that ``regrouped`` moves given to their new speaker. A new speaker is labelled
    after the last ``SPEAKER_NN`` and its embedding is its phrases' centroid. ``may_add`` is false
    when the client fixed the count (``num_speakers``) or it is at ``max_speakers``. Where the phrases
    are all one speaker's, their ``spread`` comes with the answer (``Checked``)."""
    spoken = phrases(words, word_speakers(words, found.turns))
    vectors = embedded(spoken, samples, sampling_rate, embed)
    added: list[str] = []

    def new_label() -> str:
        numbers = [int(label[8:]) for label in found.speakers + added if label[:8] == "SPEAKER_" and label[8:].isdigit()]
        added.append(f"SPEAKER_{max(numbers, default=-1) + 1:02d}")
        return added[-1]

    heard = list(dict.fromkeys(phrase.speaker for phrase in spoken))
    spread = _spread(spoken, vectors, heard[0]) if len(heard) == 1 else None
    labels = regrouped(spoken, vectors, may_add, new_label)
    spans = [(label, phrase.start, phrase.end) for phrase, label in zip(spoken, labels, strict=True) if label != phrase.speaker]
    if not spans:
        return Checked(found, spread)
    added_voices = {}
    for label in added:
        centre = _centre(vectors, [index for index, other in enumerate(labels) if other == label and vectors[index] is not None])
        if centre is not None:
            added_voices[label] = centre.astype(np.float32)
    return Checked(moved(found, spans, added_voices), spread)


def embedded(
    spoken: Sequence[Phrase], samples: np.ndarray, sampling_rate: int, embed: Callable[[np.ndarray], np.ndarray]
) -> list[np.ndarray | None]:
    """Each phrase's voice, None under ``PHRASE_MIN_S``. Phrases are embedded in batches of one
    length: each is cut to a multiple of ``PHRASE_MIN_S`` (losing under half a second) and to at
    most ``PHRASE_MAX_S`` (a single long word can pass it), and the phrases of one length go
    through the model together (a third of the time of one by one)."""
    step = round(PHRASE_MIN_S * sampling_rate)
    by_length: dict[int, list[int]] = {}
    for index, phrase in enumerate(spoken):
        length = int(min(phrase.seconds, PHRASE_MAX_S) * sampling_rate) // step * step
        if length > 0 and int(phrase.start * sampling_rate) + length <= len(samples):
            by_length.setdefault(length, []).append(index)
    vectors: list[np.ndarray | None] = [None] * len(spoken)
    for length, indices in by_length.items():
        for first in range(0, len(indices), EMBEDDING_BATCH):
            batch = indices[first : first + EMBEDDING_BATCH]
            starts = [int(spoken[index].start * sampling_rate) for index in batch]
            rows = embed(np.stack([samples[start : start + length] for start in starts]))
            for index, row in zip(batch, rows, strict=True):
                vectors[index] = row
    return vectors


def phrases(words: Sequence[Chunk], speakers: Sequence[str]) -> list[Phrase]:
    """The words cut into phrases: a new one at a change of speaker, after a sentence's end, after
    a pause of ``PHRASE_PAUSE_S`` and where the phrase would pass ``PHRASE_MAX_S``. Words without
    times are left out (they belong to no stretch of audio)."""
    timed = [index for index, word in enumerate(words) if word.start is not None and word.end is not None]
    found: list[Phrase] = []
    first = None
    for position, index in enumerate(timed):
        if first is not None:
            previous = timed[position - 1]
            if (
                speakers[index] != speakers[previous]
                or ends_sentence(words[previous].text)
                or words[index].start - words[previous].end >= PHRASE_PAUSE_S
                or words[index].end - words[first].start > PHRASE_MAX_S
            ):
                found.append(_phrase(words, speakers, first, previous))
                first = None
        first = index if first is None else first
    if first is not None:
        found.append(_phrase(words, speakers, first, timed[-1]))
    return found


def _phrase(words: Sequence[Chunk], speakers: Sequence[str], first: int, last: int) -> Phrase:
    """Words ``first`` to ``last``, from the earliest start to the latest end: Whisper's word times
    are not always in order (a word ending at 22.9 s before one ending at 16.3 s was seen)."""
    timed = [words[index] for index in range(first, last + 1) if words[index].start is not None and words[index].end is not None]
    return Phrase(speakers[first], range(first, last + 1), min(float(word.start) for word in timed), max(float(word.end) for word in timed))


def regrouped(
    spoken: Sequence[Phrase], vectors: Sequence[np.ndarray | None], may_add: bool, new_label: Callable[[], str]
) -> list[str]:
    """Each phrase's speaker after the check: a speaker whose embedded phrases (``vectors``, None
    for phrases too short to embed) fall into two groups further apart than ``SPLIT_DISTANCE``,
    each of ``MIN_SIDE_S`` or more, loses the smaller group to the other speaker nearest to it
    (within ``SPLIT_DISTANCE``) or, when ``may_add``, to a new speaker from ``new_label``. Each
    speaker found by diarization is questioned once."""
    labels = [phrase.speaker for phrase in spoken]
    for speaker in dict.fromkeys(labels):
        sides = _halves(labels, vectors, speaker)
        seconds = [sum(spoken[index].seconds for index in side) for side in sides]
        if len(sides) < 2 or not all(sides) or min(seconds) < MIN_SIDE_S:
            continue
        centres = [_centre(vectors, side) for side in sides]
        if _distance(*centres) <= SPLIT_DISTANCE:
            continue
        smaller = int(seconds[1] < seconds[0])
        others = {
            label: _centre(vectors, [i for i, other in enumerate(labels) if other == label and vectors[i] is not None])
            for label in dict.fromkeys(labels) if label != speaker
        }
        distances = {label: _distance(centres[smaller], centre) for label, centre in others.items() if centre is not None}
        nearest = min(distances, key=distances.__getitem__, default=None)
        if nearest is not None and distances[nearest] <= SPLIT_DISTANCE:
            target = nearest
        elif may_add:
            target = new_label()
        else:
            continue
        for index in sides[smaller]:
            labels[index] = target
    return labels


def holds_two_voices(vectors: Sequence[np.ndarray], seconds: Sequence[float], min_side_s: float = MIN_SIDE_S) -> bool:
    """Whether pieces of one person's supposed speech (embedded ``vectors``, lasting ``seconds``) hold two
    voices by the phrase check's judgement: two halves further apart than ``SPLIT_DISTANCE``, each of
    ``min_side_s`` or more. Too few pieces to tell (``MIN_PHRASES``): False."""
    pieces = list(vectors)
    sides = _halves(["one"] * len(pieces), pieces, "one")
    if len(sides) < 2 or not all(sides) or min(sum(seconds[index] for index in side) for side in sides) < min_side_s:
        return False
    first, second = (_centre(pieces, side) for side in sides)
    assert first is not None and second is not None
    return _distance(first, second) > SPLIT_DISTANCE


def _halves(labels: Sequence[str], vectors: Sequence[np.ndarray | None], speaker: str) -> list[list[int]]:
    """The embedded phrases of ``speaker`` (indices) cut in two by average linkage (cosine), an evenly
    spaced sample of ``MAX_CLUSTERED`` beyond that many and every phrase then to the nearer half's centre;
    [] under ``MIN_PHRASES`` embedded phrases. A half may be empty (all the phrases alike)."""
    from scipy.cluster.hierarchy import fcluster, linkage

    own = [index for index, label in enumerate(labels) if label == speaker and vectors[index] is not None]
    if len(own) < MIN_PHRASES:
        return []
    matrix = np.stack([_unit(vectors[index]) for index in own])
    sample = matrix[:: -(-len(own) // MAX_CLUSTERED)]  # the linkage's memory grows with the square of its phrases
    halves = fcluster(linkage(sample, method="average", metric="cosine"), 2, criterion="maxclust")
    if len(sample) < len(own):  # every phrase to the nearer centre of the sample's two halves
        sampled = np.stack([_unit(sample[halves == half].mean(axis=0)) for half in (1, 2) if np.any(halves == half)])
        halves = 1 + np.argmax(matrix @ sampled.T, axis=1)
    return [[own[k] for k in range(len(own)) if halves[k] == half] for half in (1, 2)]


def _spread(spoken: Sequence[Phrase], vectors: Sequence[np.ndarray | None], speaker: str) -> float | None:
    """How far apart the two halves of ``speaker``'s phrases lie (``_halves``): 0 when all alike, None with
    too few phrases to tell."""
    sides = _halves([phrase.speaker for phrase in spoken], vectors, speaker)
    if not sides:
        return None
    if not all(sides):
        return 0.0
    first, second = (_centre(vectors, side) for side in sides)
    assert first is not None and second is not None
    return _distance(first, second)


def _unit(vector: np.ndarray | None) -> np.ndarray:
    assert vector is not None
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _centre(vectors: Sequence[np.ndarray | None], indices: Sequence[int]) -> np.ndarray | None:
    return np.mean([_unit(vectors[index]) for index in indices], axis=0) if indices else None


def _distance(first: np.ndarray, second: np.ndarray) -> float:
    norms = float(np.linalg.norm(first) * np.linalg.norm(second))
    return 1.0 - float(np.dot(first, second)) / norms if norms else 2.0


def moved(found: Diarization, spans: Sequence[tuple[str, float, float]], voices: dict[str, np.ndarray]) -> Diarization:
    """``found`` with each span ``(speaker, start, end)`` given to that speaker: carved out of the
    turns of whoever held it, in the exclusive turns and on the timeline (where the speaker's own
    overlapping turns are joined with it). ``voices`` adds or replaces speakers' embeddings."""
    turns, timeline = list(found.turns), list(found.timeline)
    for speaker, start, end in spans:
        turns = _given(turns, speaker, start, end, exclusive=True)
        timeline = _given(timeline, speaker, start, end, exclusive=False)
    return Diarization(
        turns=[turn for turn in turns if turn.end - turn.start >= MIN_TURN_S],
        timeline=timeline,
        embeddings={**found.embeddings, **voices},
    )


def _given(turns: list[Turn], speaker: str, start: float, end: float, exclusive: bool) -> list[Turn]:
    """``turns`` with ``[start, end]`` given to ``speaker``: cut out of the turns of other speakers
    that held it (all of them when ``exclusive``, else only those the span was carved from, i.e. the
    speaker attributed there), joined with ``speaker``'s own turns that touch it."""
    cut = (start, end)  # the span cut out of others; joining the speaker's own turns widens only the new turn
    held = [turn for turn in turns if turn.start < end and turn.end > start and turn.speaker != speaker]
    if not exclusive:  # on the timeline, only the voice the words were attributed to gives the span up
        longest = max(held, key=lambda turn: min(turn.end, end) - max(turn.start, start), default=None)
        held = [turn for turn in held if longest is not None and turn.speaker == longest.speaker]
    kept: list[Turn] = []
    for turn in turns:
        if turn in held:
            pieces = (Turn(turn.speaker, turn.start, cut[0]), Turn(turn.speaker, cut[1], turn.end))
            kept += [piece for piece in pieces if piece.end > piece.start]
        elif turn.speaker == speaker and turn.start <= end and turn.end >= start:
            start, end = min(start, turn.start), max(end, turn.end)
        else:
            kept.append(turn)
    kept.append(Turn(speaker, start, end))
    return sorted(kept, key=lambda turn: (turn.start, turn.end, turn.speaker))
