"""Which (chunk, local speaker) pairs diarization embeds, and which borrow a neighbour's embedding.

pyannote embeds every local speaker of every 10-s segmentation chunk. With the shipped step of
2.5 s each second of speech is embedded four times, and on long recordings those embeddings set
diarization's pace (CAM++ is most of its time). Neighbouring chunks share most of their audio,
and segmentation-3.0 follows one voice across them: where a speaker of one chunk is active on
the same frames as a speaker of the neighbouring chunk, they are one voice and one embedding
serves both. So one chunk in ``stride`` is embedded, and a chunk in between is skipped when each
of its active speakers coincides (``min_agreement``, intersection over union of their active
frames where the chunks overlap) with a different speaker of an embedded neighbour; it then
takes those embeddings. A chunk where any speaker has no such partner (a voice that starts
there, a segmentation that disagrees) is embedded as before, so every voice keeps its own.

Pure numpy, so the rule is testable without a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_AGREEMENT = 0.5


@dataclass(frozen=True)
class EmbeddingPlan:
    """``embedded[c]``: chunk ``c``'s speakers are embedded. ``source[c, s]`` is the (chunk,
    speaker) whose embedding pair (c, s) takes: itself when its chunk is embedded or when it is
    silent there (a silent speaker's embedding costs nothing), else its partner's."""

    embedded: np.ndarray  # (chunks,) bool
    source: np.ndarray  # (chunks, speakers, 2) int

    @property
    def skipped_share(self) -> float:
        """The share of chunks whose speakers were not embedded."""
        return float(1.0 - self.embedded.mean()) if len(self.embedded) else 0.0


def plan_embeddings(
    activity: np.ndarray, step_frames: float, stride: int, min_agreement: float = MIN_AGREEMENT
) -> EmbeddingPlan:
    """Plan for ``activity`` (chunks, frames, local speakers; > 0.5 is active) with chunks
    ``step_frames`` frames apart. ``stride`` 1 embeds every chunk (pyannote's own behaviour).
    Embedded chunks: the first, every ``stride``-th, the last, and any the rule cannot skip."""
    active = np.nan_to_num(activity) > 0.5
    chunks, _, speakers = active.shape
    source = np.stack(np.meshgrid(np.arange(chunks), np.arange(speakers), indexing="ij"), axis=-1)
    grid = np.zeros(chunks, dtype=bool)
    grid[::stride] = True
    if chunks:
        grid[-1] = True
    embedded = grid.copy()
    grid_chunks = np.flatnonzero(grid)
    for chunk in np.flatnonzero(~grid):
        position = np.searchsorted(grid_chunks, chunk)
        neighbours = (grid_chunks[position - 1], grid_chunks[position])
        partners = _partners(active, chunk, neighbours, step_frames, min_agreement)
        if partners is None:
            embedded[chunk] = True
            continue
        for speaker, partner in partners.items():
            source[chunk, speaker] = partner
    return EmbeddingPlan(embedded=embedded, source=source)


def _partners(
    active: np.ndarray, chunk: int, neighbours: tuple[int, ...], step_frames: float, min_agreement: float
) -> dict[int, tuple[int, int]] | None:
    """Each active speaker of ``chunk`` -> its (neighbour, speaker), or None when one has none
    or two would share one (they would then be merged into one voice)."""
    frames = active.shape[1]
    partners: dict[int, tuple[int, int]] = {}
    for speaker in np.flatnonzero(active[chunk].any(axis=0)):
        best, best_agreement = None, min_agreement
        for neighbour in neighbours:
            offset = round(float(neighbour - chunk) * step_frames)  # chunk's frame i is the neighbour's i - offset
            first, last = max(0, offset), min(frames, frames + offset)
            if first >= last:
                continue
            own = active[chunk, first:last, speaker]
            theirs = active[neighbour, first - offset : last - offset]
            union = (own[:, None] | theirs).sum(axis=0)
            agreement = (own[:, None] & theirs).sum(axis=0) / np.maximum(union, 1)  # 0 where neither is active
            candidate = int(np.argmax(agreement))
            if agreement[candidate] >= best_agreement:
                best, best_agreement = (int(neighbour), candidate), agreement[candidate]
        if best is None or best in partners.values():
            return None
        partners[int(speaker)] = best
    return partners


def shared_embeddings(embeddings: np.ndarray, plan: EmbeddingPlan) -> np.ndarray:
    """(chunks, speakers, dimension) embeddings with every pair given its source's embedding."""
    return embeddings[plan.source[..., 0], plan.source[..., 1]]
