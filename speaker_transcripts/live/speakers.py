"""Who is speaking, live: diart's rolling-window diarization on the file path's own pyannote models.

Every ``step_s`` the last ``window_s`` of the session's audio go through the diarization
pipeline's segmentation model (segmentation-3.0: up to three local speakers, hard activity per
frame) and each local speaker that talks in the window through its speaker-embedding model
(CAM++ for the embedded pipeline: the frames where they talk alone, or all of theirs when they
never do), then ``clustering.OnlineClustering`` names them for the session. Each window's
activity is added to the session's timeline with a Hamming weight (diart's ``DelayedAggregation``),
and a stretch of the timeline is final once ``latency_s`` has passed it: every window that will
ever see it has then been added. What is final never changes, so words labelled from it keep
their speaker.

The models are the ones file requests use (``pipeline/diarization.py`` loads them once); the
caller holds the orchestrator's lock while a step runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from speaker_transcripts.errors import RequestAbandoned
from speaker_transcripts.live.clustering import OnlineClustering
from speaker_transcripts.pipeline.cpu_threads import one_thread_on_cpu
from speaker_transcripts.pipeline.diarization import Turn

MIN_TRACKED_IOU = 0.5  # chunk_embeddings.MIN_AGREEMENT: the file path's rule for "the same voice"


@dataclass(frozen=True)
class DiarizerSettings:
    """Window, step and latency (seconds); diart's defaults are 5 / 0.5 / 0.5-5. Measured with
    ``bench/live.py`` (docs/quality.md, "Live speakers")."""

    window_s: float = 5.0
    step_s: float = 0.5
    latency_s: float = 2.0
    # Every this many windows each voice is embedded; in between, a voice that segmentation follows from
    # the window before (the same frames active, ``MIN_TRACKED_IOU``) keeps its label unembedded, as the
    # file path shares embeddings between neighbouring chunks (``models/chunk_embeddings.py``).
    embed_every: int = 4


def supports_live_diarization(pipeline: Any) -> bool:
    """Whether the pipeline exposes pyannote's segmentation and embedding models (any pyannote
    ``SpeakerDiarization``, the embedded one included); other seams diarize whole files only."""
    return hasattr(pipeline, "_segmentation") and callable(getattr(pipeline, "_embedding", None))


class LiveDiarizer:
    """The speaker timeline of one session, final up to ``horizon`` (session seconds)."""

    def __init__(
        self,
        pipeline: Any,
        clustering: OnlineClustering,
        sampling_rate: int,
        settings: DiarizerSettings | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """``should_stop`` saying yes (the client left) ends a catch-up between windows with ``RequestAbandoned``."""
        self.settings = settings or DiarizerSettings()
        self.should_stop = should_stop
        self.clustering = clustering
        self.sampling_rate = sampling_rate
        self._segmentation = pipeline._segmentation
        self._embedding = pipeline._embedding
        self._window = round(self.settings.window_s * sampling_rate)
        self._step = round(self.settings.step_s * sampling_rate)
        self.next_end = self._step  # the sample the next window ends at
        self.horizon = 0.0  # seconds: the timeline is final before this
        self.turns: list[Turn] = []
        self._frame_s: float | None = None
        self._start_frame = 0  # absolute frame index of the accumulators' first frame
        self._weights = np.zeros(0)
        self._activity: dict[str, np.ndarray] = {}
        self._windows_run = 0
        self._previous: tuple[np.ndarray, list[str | None]] | None = None  # the last window's activity and labels

    @property
    def oldest_needed(self) -> int:
        """The first sample a future step reads."""
        return max(self.next_end - self._window, 0)

    def advance(self, read: Callable[[int, int], np.ndarray], available: int, final: bool = False) -> list[Turn]:
        """Run every step whose window ends by ``available`` (the samples ``read(start, end)`` can
        give; before the session's start they are silence) and return the turns made final. With
        ``final`` (the end of an item or of the session) everything up to ``available`` becomes
        final now, with the windows there are."""
        while self.next_end <= available:
            if self.should_stop is not None and self.should_stop():
                raise RequestAbandoned("the live session was abandoned during diarization")
            self._run_window(read, self.next_end)
            self.next_end += self._step
        if final and available > self.next_end - self._step:
            self._run_window(read, available, on_grid=False)
        if self._frame_s is None:
            return []
        until = available / self.sampling_rate if final else available / self.sampling_rate - self.settings.latency_s
        return self._finalise(until)

    def _run_window(self, read: Callable[[int, int], np.ndarray], end: int, on_grid: bool = True) -> None:
        """One window ending at ``end`` added to the timeline. The last one of a final ``advance`` ends
        wherever the turn ended, off the step grid (``on_grid=False``), and whether it runs depends on
        how far the diarizer had got, so on load: its voices are matched to the speakers there are and
        teach nothing, so that who the session's speakers are, and how many, never depends on load."""
        import torch

        start = end - self._window
        audio = read(max(start, 0), end)
        chunk = np.concatenate([np.zeros(self._window - len(audio), dtype=np.float32), audio])  # silence before the session
        waveform = torch.from_numpy(np.ascontiguousarray(chunk, dtype=np.float32))[None, None]
        with torch.inference_mode(), one_thread_on_cpu(self._segmentation.device):  # small models: one thread (cpu_threads.py)
            activity = np.nan_to_num(self._segmentation.infer(waveform)[0])  # (frames, local speakers)
            activity = (activity > 0.5).astype(np.float32)
            frames = activity.shape[0]
            if self._frame_s is None:
                self._frame_s = self.settings.window_s / frames
            labels = (self._labels(waveform, activity) if on_grid  # off the grid: learnt from nothing, teaching nothing
                      else self._clustered(waveform, activity, [None] * activity.shape[1], learn=False))
        first = round(start / self.sampling_rate / self._frame_s)
        self._grow(first + frames)
        offset = first - self._start_frame
        weight = np.hamming(frames + 2)[1:-1]  # never zero: every frame a window sees counts a little
        lo = max(offset, 0)
        self._weights[lo : offset + frames] += weight[lo - offset :]
        for local, label in enumerate(labels):
            if label is not None:
                track = self._activity.setdefault(label, np.zeros_like(self._weights))
                track[lo : offset + frames] += (weight * activity[:, local])[lo - offset :]

    def _labels(self, waveform: Any, activity: np.ndarray) -> list[str | None]:
        """The session label of each local speaker of the window (None: silent or unknown yet): the
        label of the voice segmentation followed from the window before, or the clustering's for the
        embeddings of the others (of every voice, one window in ``embed_every``)."""
        labels = self._tracked(activity) if self._windows_run % self.settings.embed_every else [None] * activity.shape[1]
        self._windows_run += 1
        labels = self._clustered(waveform, activity, labels, learn=True)
        self._previous = (activity, labels)
        return labels

    def _clustered(self, waveform: Any, activity: np.ndarray, labels: list[str | None], learn: bool) -> list[str | None]:
        """``labels`` with each unlabelled voice that talks embedded and given the clustering's label."""
        import torch

        share = activity.mean(axis=0)
        talking = [local for local in range(activity.shape[1]) if share[local] > 0 and labels[local] is None]
        if not talking:
            return labels
        alone = activity * (activity.sum(axis=1, keepdims=True) < 2)
        masks = np.stack([alone[:, k] if alone[:, k].sum() * self._frame_s >= 0.5 else activity[:, k] for k in talking])
        embeddings = np.full((activity.shape[1], self._dimension()), np.nan)
        vectors = self._embedding(waveform.repeat(len(talking), 1, 1), torch.from_numpy(masks))
        embeddings[talking] = np.asarray(vectors, dtype=np.float64)
        clustered = self.clustering.assign(embeddings, list(share), taken={label for label in labels if label}, learn=learn)
        return [label or clustered[local] for local, label in enumerate(labels)]

    def _tracked(self, activity: np.ndarray) -> list[str | None]:
        """Labels carried over from the window one step before, where a voice's active frames there
        and here (on the audio both hold) coincide."""
        labels: list[str | None] = [None] * activity.shape[1]
        if self._previous is None:
            return labels
        before, before_labels = self._previous
        shift = round(self.settings.step_s / self._frame_s)
        if shift >= len(activity):
            return labels
        here, there = activity[: len(activity) - shift] > 0, before[shift:] > 0
        for local in range(activity.shape[1]):
            overlaps = [
                (np.sum(here[:, local] & there[:, other]) / max(np.sum(here[:, local] | there[:, other]), 1), other)
                for other in range(before.shape[1])
                if before_labels[other] is not None
            ]
            best = max(overlaps, default=(0.0, None))
            if best[0] >= MIN_TRACKED_IOU and before_labels[best[1]] not in labels:
                labels[local] = before_labels[best[1]]
        return labels

    def _dimension(self) -> int:
        return int(self._embedding.dimension)

    def _grow(self, frames: int) -> None:
        extra = frames - self._start_frame - len(self._weights)
        if extra > 0:
            self._weights = np.concatenate([self._weights, np.zeros(extra)])
            self._activity = {label: np.concatenate([track, np.zeros(extra)]) for label, track in self._activity.items()}

    def _finalise(self, until_s: float) -> list[Turn]:
        """Binarise the timeline from the horizon to ``until_s``; drop what is behind it."""
        assert self._frame_s is not None
        last = min(int(until_s / self._frame_s), self._start_frame + len(self._weights))
        count = last - self._start_frame
        if count <= 0:
            return []
        weights = np.maximum(self._weights[:count], 1e-9)
        made: list[Turn] = []
        for label, track in self._activity.items():
            active = np.concatenate([[False], track[:count] / weights >= 0.5, [False]])
            edges = np.flatnonzero(np.diff(active.astype(np.int8)))
            for begin, end in zip(edges[::2], edges[1::2], strict=True):
                made.append(Turn(label, (self._start_frame + begin) * self._frame_s, (self._start_frame + end) * self._frame_s))
        self._weights = self._weights[count:]
        self._activity = {label: track[count:] for label, track in self._activity.items()}
        self._start_frame = last
        self.horizon = max(self.horizon, last * self._frame_s)
        made.sort(key=lambda turn: (turn.start, turn.speaker))
        for turn in made:  # a turn running on from the last stretch made final is one turn
            before = next((index for index in range(len(self.turns) - 1, -1, -1) if self.turns[index].speaker == turn.speaker), None)
            if before is not None and self.turns[before].end >= turn.start - 1e-6:
                self.turns[before] = Turn(turn.speaker, self.turns[before].start, turn.end)
            else:
                self.turns.append(turn)
        return made

    def turns_between(self, start: float, end: float) -> list[Turn]:
        """The final turns that reach into ``[start, end]`` (for labelling words there)."""
        return [turn for turn in self.turns if turn.end >= start and turn.start <= end]

    def forget_before(self, seconds: float) -> None:
        """Turns wholly before ``seconds`` will label no more words: keep the list short. The last turn
        stays, so words in a stretch where the timeline found no voice go to the last speaker heard."""
        self.turns = [turn for turn in self.turns if turn.end >= seconds] or self.turns[-1:]
