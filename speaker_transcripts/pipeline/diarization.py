"""Speaker diarization: load pyannote, run it on decoded audio, merge its turns with ASR text.

The diarization step is a seam: the handler's ``diarization_pipeline`` may be any callable with
pyannote's signature, ``pipeline({"waveform": (1, n) float tensor, "sample_rate": 16000},
num_speakers=..., min_speakers=..., max_speakers=...)`` (only the hints sent), returning an
``Annotation`` or pyannote 4's ``DiarizeOutput``; tests and the evaluation harness plug reference
turns in through it. It gives a ``Diarization``: the turns one speaker at a time (for attributing
words), the timeline with overlaps kept, and each speaker's embedding when the pipeline has them.

The merge improves on the blog's, which gave each chunk to the turn whose *end* is nearest and
dropped chunks after the last turn: here each chunk (``assign_speakers``) or word (``word_speakers``,
read as a sequence) goes to the speaker it overlaps most, nothing is dropped or repeated, and
neighbouring chunks of one speaker join into sentence-sized segments (docs/design.md). The root's
``diarization_utils.py`` exposes these under the blog's names.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speaker_transcripts.errors import RequestAbandoned
from speaker_transcripts.pipeline.transcript import Chunk, ends_sentence, segment_ranges, span_of

if TYPE_CHECKING:
    import numpy as np

    from speaker_transcripts.config import ModelSettings


UNKNOWN_SPEAKER = "UNKNOWN"
DiarizationPipeline = Callable[..., Any]


@dataclass(frozen=True)
class Turn:
    """One speaker talking from ``start`` to ``end`` seconds."""

    speaker: str
    start: float
    end: float

    def to_dict(self) -> dict[str, Any]:
        return {"speaker": self.speaker, "start": round(self.start, 3), "end": round(self.end, 3)}


@dataclass(frozen=True)
class Diarization:
    """What diarization found in one recording.

    ``turns`` has one speaker at a time (pyannote's exclusive diarization, slivers dropped): the
    input of word attribution. ``timeline`` is the diarization as found, several speakers at once
    where they overlap: who spoke when, scored and returned as it is. ``embeddings`` holds each
    speaker's voice (pyannote's centroid of their chunk embeddings), empty when the seam gives none.
    """

    turns: list[Turn]
    timeline: list[Turn]
    embeddings: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def speakers(self) -> list[str]:
        """Every speaker label, in order of first appearance on the timeline."""
        return list(dict.fromkeys(turn.speaker for turn in sorted(self.timeline + self.turns, key=lambda t: t.start)))

    def renamed(self, names: Mapping[str, str]) -> Diarization:
        """The same diarization with the labels in ``names`` replaced (others kept)."""

        def relabel(turns: list[Turn]) -> list[Turn]:
            return [Turn(names.get(turn.speaker, turn.speaker), turn.start, turn.end) for turn in turns]

        embeddings = {names.get(label, label): vector for label, vector in self.embeddings.items()}
        return Diarization(turns=relabel(self.turns), timeline=relabel(self.timeline), embeddings=embeddings)


@dataclass(frozen=True)
class SpeakerSegment:
    """Consecutive transcript chunks attributed to one speaker; ``overlapping`` names the others
    heard talking during it (overlapping speech), in order of first appearance."""

    speaker: str
    text: str
    start: float
    end: float
    overlapping: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        segment: dict[str, Any] = {"speaker": self.speaker, "text": self.text, "timestamp": [self.start, self.end]}
        if self.overlapping:
            segment["overlapping"] = list(self.overlapping)
        return segment


MIN_OVERLAP_S = 0.3  # less shared time is turn-taking (or a turn edge's imprecision), not talking over someone


def with_overlaps(segments: Sequence[SpeakerSegment], timeline: Sequence[Turn]) -> list[SpeakerSegment]:
    """The segments, each naming the other speakers whose timeline turns share ``MIN_OVERLAP_S``
    or more of it: the text is one speaker's, but a listener hears both."""
    marked = []
    for segment in segments:
        shared: dict[str, float] = {}
        for turn in timeline:
            if turn.speaker != segment.speaker:
                seconds = min(segment.end, turn.end) - max(segment.start, turn.start)
                if seconds > 0:
                    shared[turn.speaker] = shared.get(turn.speaker, 0.0) + seconds
        others = tuple(speaker for speaker, seconds in shared.items() if seconds >= MIN_OVERLAP_S)
        marked.append(SpeakerSegment(segment.speaker, segment.text, segment.start, segment.end, others))
    return marked


def load_diarization_pipeline(settings: ModelSettings, device: str) -> DiarizationPipeline:
    """Load a pyannote pipeline (Hub id or local directory with ``config.yaml``) at start-up.

    Fails here, with what to do, rather than on the first request: a gated model without an
    accepted licence or token makes pyannote return ``None`` instead of raising.
    """
    # pyannote sends usage telemetry unless told not to; respect a user who opted in.
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    import torch
    from pyannote.audio import Pipeline

    name = settings.diarization_model
    token = settings.hf_token.get_secret_value() if settings.hf_token else None
    advice = (
        f"DIARIZATION_MODEL={name} could not be loaded. Use a local directory with a pyannote config.yaml, or a Hub id "
        "whose conditions you accepted on huggingface.co, with HF_TOKEN set to a token that can read it."
    )
    try:
        diarization = Pipeline.from_pretrained(name, token=token)
    except Exception as error:  # pyannote raises many types (HTTP, OS, Hub, YAML); all mean the same to a user
        raise RuntimeError(f"{advice} ({type(error).__name__})") from error
    if diarization is None:
        raise RuntimeError(advice)
    return diarization.to(torch.device(device))


MIN_TURN_S = 0.2  # shorter "turns" are segmentation slivers at speaker changes, not speech


def diarize(
    pipeline: DiarizationPipeline,
    samples: np.ndarray,
    sampling_rate: int,
    hints: dict[str, int],
    should_stop: Callable[[], bool] | None = None,
) -> Diarization:
    """Run the seam on shared, already-decoded samples.

    Turns under ``MIN_TURN_S`` are dropped from ``turns`` (not from the timeline): pyannote
    leaves slivers of the previous speaker at the start of the next one's turn (0.13 s on the
    sample conversation), too short for a word, and word attribution would otherwise hand the
    first word of a turn to the wrong speaker. pyannote's own ``SPEAKER_NN`` labels are
    renumbered in order of first appearance (it numbers clusters, so the first voice heard could
    be ``SPEAKER_01``); other labels are kept. ``should_stop`` saying yes ends a pyannote
    pipeline at its next step (segmentation or embedding batch) with ``RequestAbandoned``;
    other seams run to the end. A request's 16-bit samples (``samples.py``) are handed to pyannote
    as they are when its models can be given float32 batch by batch (``_models_take_float32``);
    otherwise they are made float32 first.
    """
    import torch
    from pyannote.audio import Pipeline

    from speaker_transcripts.pipeline.cpu_threads import one_thread_on_cpu
    from speaker_transcripts.pipeline.samples import as_float32

    options: dict[str, Any] = dict(hints)
    if isinstance(pipeline, Pipeline) and should_stop is not None:
        options["hook"] = _progress_hook(should_stop)
    # pyannote on CPU runs on one thread (cpu_threads.py): 2.4x faster on a 10-min file, and Whisper keeps the other core.
    threads = one_thread_on_cpu(getattr(pipeline, "device", torch.device("cpu"))) if isinstance(pipeline, Pipeline) else nullcontext()
    with torch.inference_mode(), threads, warnings.catch_warnings(), _models_take_float32(pipeline) as converted:
        waveform = torch.from_numpy(samples if converted else as_float32(samples)).unsqueeze(0)
        # pyannote averages an empty set of embeddings on audio with no speaker: numpy warns, the answer is no turns
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        warnings.filterwarnings("ignore", message="invalid value encountered in divide", category=RuntimeWarning)
        output = pipeline({"waveform": waveform, "sample_rate": sampling_rate}, **options)
    turns = [turn for turn in turns_from_output(output) if turn.end - turn.start >= MIN_TURN_S]
    found = Diarization(turns=turns, timeline=turns_from_output(output, exclusive=False), embeddings=_embeddings_of(output))
    labels = list(dict.fromkeys([turn.speaker for turn in turns] + found.speakers))  # attributed speakers first
    if not all(re.fullmatch(r"SPEAKER_\d+", label) for label in labels):
        return found
    return found.renamed({label: f"SPEAKER_{index:02d}" for index, label in enumerate(labels)})


@contextmanager
def _models_take_float32(pipeline: DiarizationPipeline) -> Iterator[bool]:
    """While it lasts, pyannote's segmentation and embedding models turn whatever waveforms they
    are given into float32 as they take them (a forward pre-hook each), so the pipeline can slide
    over a request's 16-bit samples and crop them, and only a batch at a time is float32: a
    float32 copy of a 3-hour file is 691 MB. Yields whether both models were found (torch
    modules at pyannote's ``_segmentation.model`` and ``_embedding.model_``); other seams get
    float32."""
    import torch

    models = [
        getattr(getattr(pipeline, "_segmentation", None), "model", None),
        getattr(getattr(pipeline, "_embedding", None), "model_", None),
    ]
    if not all(isinstance(model, torch.nn.Module) for model in models):
        yield False
        return
    handles = [model.register_forward_pre_hook(_float32_waveforms) for model in models]
    try:
        yield True
    finally:
        for handle in handles:
            handle.remove()


def _float32_waveforms(_: Any, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    from speaker_transcripts.pipeline.samples import as_float32_tensor

    waveforms, *rest = inputs
    return (as_float32_tensor(waveforms), *rest)


def _embeddings_of(output: Any) -> dict[str, np.ndarray]:
    """``DiarizeOutput.speaker_embeddings`` by label; rows pyannote padded with zeros (speakers the
    count found but clustering did not) and non-finite rows are left out: they describe no voice."""
    import numpy as np

    vectors = getattr(output, "speaker_embeddings", None)
    annotation = getattr(output, "speaker_diarization", None)
    if vectors is None or annotation is None:
        return {}
    return {
        str(label): np.asarray(vector, dtype=np.float32)
        for label, vector in zip(annotation.labels(), vectors, strict=False)
        if np.all(np.isfinite(vector)) and np.any(vector)
    }


def speaker_embedder(pipeline: DiarizationPipeline) -> Callable[[np.ndarray], np.ndarray] | None:
    """A function embedding a voice (16 kHz samples) as the pipeline embeds its speakers, or None
    when the seam has no embedding model. It uses pyannote's own model (``_embedding``), so clips
    and diarized speakers are compared in one space. Given a (clips, samples) array it embeds the
    clips as one batch and returns one row each: on CPU a batch of 1-s clips costs a third of the
    clips one by one (the model is many small layers)."""
    model = getattr(pipeline, "_embedding", None)
    if model is None or not callable(model):
        return None
    return _embedding_function(model, model.device)


def load_speaker_embedder(settings: ModelSettings, device: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """``speaker_embedder`` of the configured pipeline, for enrolling voices without diarizing.
    The embedded pipeline's CAM++ is loaded alone from its checkpoint, without pyannote (whose
    import is half of an enrolment's time: ``models/campplus_network.py``); any other pipeline is
    loaded whole and its model used."""
    from speaker_transcripts.models.campplus_network import load_voice_embedder

    checkpoint = _embedding_checkpoint(Path(settings.diarization_model or ""))
    if checkpoint is not None and (network := load_voice_embedder(checkpoint)) is not None:
        import torch

        return _embedding_function(network.to(device), torch.device(device))
    return speaker_embedder(load_diarization_pipeline(settings, device))


def _embedding_checkpoint(folder: Path) -> Path | None:
    """The embedding model's checkpoint file of a local pipeline folder whose ``config.yaml`` names
    one inside the folder (``$model/...``, as ``models/pyannote_pipeline.py`` writes it), else None."""
    import yaml

    config = folder / "config.yaml"
    if not config.is_file():
        return None
    try:
        embedding = yaml.safe_load(config.read_text())["pipeline"]["params"]["embedding"]
    except (yaml.YAMLError, KeyError, TypeError):
        return None  # pyannote reads the folder and says what is wrong
    if not isinstance(embedding, str) or not embedding.startswith("$model/"):
        return None
    checkpoint = folder / embedding.removeprefix("$model/") / "pytorch_model.bin"
    return checkpoint if checkpoint.is_file() else None


def _embedding_function(model: Callable[..., Any], device: Any) -> Callable[[np.ndarray], np.ndarray]:
    """16 kHz samples (one clip, or a batch of clips of one length) -> their embeddings, on one thread on CPU."""

    def embed(samples: np.ndarray) -> np.ndarray:
        import numpy as np
        import torch

        from speaker_transcripts.pipeline.cpu_threads import one_thread_on_cpu
        from speaker_transcripts.pipeline.samples import as_float32

        batch = np.ascontiguousarray(as_float32(samples)).reshape(-1, samples.shape[-1])
        with torch.inference_mode(), one_thread_on_cpu(device):
            vectors = model(torch.from_numpy(batch)[:, None])
        vectors = np.asarray(vectors.cpu() if isinstance(vectors, torch.Tensor) else vectors, dtype=np.float32)
        return vectors if samples.ndim == 2 else vectors[0]

    return embed


def _progress_hook(should_stop: Callable[[], bool]) -> Callable[..., None]:
    """A pyannote progress hook (called at every step and batch) that ends the run when asked."""

    def hook(*_: Any, **__: Any) -> None:
        if should_stop():
            raise RequestAbandoned("the request was abandoned during diarization")

    return hook


def turns_from_output(output: Any, exclusive: bool = True) -> list[Turn]:
    """Turns from an ``Annotation`` or a ``DiarizeOutput``.

    With ``exclusive``, ``DiarizeOutput.exclusive_speaker_diarization`` (one speaker at a time,
    built by pyannote for aligning transcripts) is preferred when present; overlapping turns
    from a plain ``Annotation`` are handled by the merge. Scoring (DER) wants the overlapping
    turns: ``exclusive=False``.
    """
    annotation = getattr(output, "exclusive_speaker_diarization", None) if exclusive else None
    annotation = annotation or getattr(output, "speaker_diarization", output)
    if not hasattr(annotation, "itertracks"):
        raise TypeError(
            f"the diarization pipeline returned {type(output).__name__}; expected a pyannote Annotation or DiarizeOutput"
        )
    turns = [
        Turn(speaker=str(label), start=float(segment.start), end=float(segment.end))
        for segment, _, label in annotation.itertracks(yield_label=True)
    ]
    return sorted(turns, key=lambda turn: (turn.start, turn.end, turn.speaker))


def assign_speakers(chunks: Sequence[Chunk], turns: Sequence[Turn]) -> list[SpeakerSegment]:
    """Attribute every chunk (by its own time) to one speaker and join neighbours of one speaker.

    The concatenation of the returned texts is the concatenation of the chunk texts (up to
    whitespace at the joins): nothing is dropped, nothing repeated.
    """
    return group_by_speaker(chunks, [speaker_for(chunk.start, chunk.end, turns) for chunk in chunks])


def group_by_speaker(chunks: Sequence[Chunk], speakers: Sequence[str]) -> list[SpeakerSegment]:
    """Sentence-sized segments of one speaker each (``transcript.segment_ranges``): a speaker's
    long monologue reads as its sentences, not as one block. Blank chunks name nobody. Segments
    follow one another: Whisper's word times can put a word's start a few hundredths before the
    previous word's end ([53.55, 56.81] then [56.79, ...]), so a segment starts no earlier than
    the one before it ends."""
    spoken = [(chunk, speaker) for chunk, speaker in zip(chunks, speakers, strict=True) if chunk.text.strip()]
    pieces = [chunk for chunk, _ in spoken]
    labels = [speaker or UNKNOWN_SPEAKER for _, speaker in spoken]
    segments: list[SpeakerSegment] = []
    for span in segment_ranges(pieces, labels):
        joined = span_of(pieces[span.start : span.stop])
        start = min(max(joined.start, segments[-1].end), joined.end) if segments else joined.start
        segments.append(SpeakerSegment(speaker=labels[span.start], text=joined.text, start=start, end=joined.end))
    return segments


MID_SENTENCE_SWITCH_S = 0.05  # evidence (seconds of overlap) a speaker change inside a sentence must beat
# ... and before a sentence's last words, more: a turn's end is where diarization boundaries err (docs/quality.md)
TURN_END_SWITCH_S = 0.3
TURN_END_WORDS = 2
SWITCH_S = 0.01  # any change costs a little, so equal evidence keeps the current speaker
PAUSE_IS_BOUNDARY_S = 0.5


def word_speakers(words: Sequence[Chunk], turns: Sequence[Turn]) -> list[str]:
    """The speaker of every word: time overlap with the turns, read as a sequence.

    Word by word, overlap alone cannot decide inside overlapping turns (a word lies wholly in
    both) and is fragile at turn edges, where Whisper's word times are least exact. So this
    picks the speaker sequence with the most total overlap (a word in a gap scores minus its
    distance to the speaker's nearest turn) minus a small cost per speaker change, and a larger
    one for a change inside a sentence (Whisper's punctuation, or no pause before the word).
    Clear time evidence always wins; where it is even, speakers change at sentence ends.
    """
    if not words:
        return []
    speakers = sorted({turn.speaker for turn in turns})
    if not speakers:
        return [UNKNOWN_SPEAKER] * len(words)
    evidence = [[_evidence(word, speaker, turns) for speaker in speakers] for word in words]
    best = list(evidence[0])
    back: list[list[int]] = []
    ending = _near_sentence_end(words)
    for index in range(1, len(words)):
        if _boundary_before(words, index):
            change = SWITCH_S
        else:
            change = TURN_END_SWITCH_S if ending[index] else MID_SENTENCE_SWITCH_S
        pointers, scores = [], []
        for current in range(len(speakers)):
            options = [best[previous] - (0.0 if previous == current else change) for previous in range(len(speakers))]
            chosen = max(range(len(speakers)), key=lambda previous: (options[previous], previous == current))
            pointers.append(chosen)
            scores.append(options[chosen] + evidence[index][current])
        back.append(pointers)
        best = scores
    path = [max(range(len(speakers)), key=lambda speaker: best[speaker])]
    for pointers in reversed(back):
        path.append(pointers[path[-1]])
    return [speakers[index] for index in reversed(path)]


def _evidence(word: Chunk, speaker: str, turns: Sequence[Turn]) -> float:
    """Seconds of ``word`` that ``speaker`` talks over, or minus the gap to their nearest turn."""
    overlap, gap = 0.0, float("inf")
    for turn in turns:
        if turn.speaker != speaker:
            continue
        overlap += max(min(word.end, turn.end) - max(word.start, turn.start), 0.0)
        gap = min(gap, max(turn.start - word.end, word.start - turn.end, 0.0))
    return overlap if overlap > 0 else -gap


def _near_sentence_end(words: Sequence[Chunk]) -> list[bool]:
    """Whether each word is one of the last ``TURN_END_WORDS`` of its sentence (the sentence ends at it
    or within the next words, with no pause between): where a diarization boundary that falls a little
    early would hand a sentence's last word to the next speaker ("How long do you think that will" /
    "take?")."""
    ending = [False] * len(words)
    for index, word in enumerate(words):
        if ends_sentence(word.text):
            first = index
            while first > 0 and index - first + 1 < TURN_END_WORDS and not _boundary_before(words, first):
                first -= 1
            for position in range(first, index + 1):
                ending[position] = True
    return ending


def _boundary_before(words: Sequence[Chunk], index: int) -> bool:
    previous = words[index - 1]
    return ends_sentence(previous.text) or words[index].start - previous.end >= PAUSE_IS_BOUNDARY_S


def speaker_for(start: float, end: float, turns: Iterable[Turn]) -> str:
    """The speaker who talks longest within ``[start, end]``; the nearest one if nobody does.

    Ties (equal overlap, or equal distance) go to the speaker whose turn starts first, then
    to the smaller label, so the result never depends on the order turns were listed in.
    """
    overlap: dict[str, float] = {}
    distance: dict[str, float] = {}
    first_start: dict[str, float] = {}
    for turn in turns:
        shared = min(end, turn.end) - max(start, turn.start)
        overlap[turn.speaker] = overlap.get(turn.speaker, 0.0) + max(shared, 0.0)
        gap = max(turn.start - end, start - turn.end, 0.0)
        distance[turn.speaker] = min(distance.get(turn.speaker, gap), gap)
        first_start[turn.speaker] = min(first_start.get(turn.speaker, turn.start), turn.start)
    if not overlap:
        return UNKNOWN_SPEAKER
    return min(overlap, key=lambda speaker: (-overlap[speaker], distance[speaker], first_start[speaker], speaker))
