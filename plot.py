"""A PNG timeline of who spoke when, with the words: quicker to check than a transcript.

One lane per speaker (or one "speech" lane without diarization), a bar per segment, and the
segment's opening words on the bar. Matplotlib's Agg backend needs no display.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from formats import cues_from_result

LABEL_CHARACTERS = 40


def plot_timeline(result: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """Draw ``result`` (the handler's response) to ``path``; returns the path written."""
    cues = cues_from_result(result)
    lanes = sorted({cue.speaker or "speech" for cue in cues}) or ["speech"]
    duration = max([result.get("duration") or 0.0] + [cue.end for cue in cues]) or 1.0
    figure, axes = plt.subplots(figsize=(max(8.0, min(40.0, duration / 4)), 1.2 + 0.6 * len(lanes)))
    colours = plt.get_cmap("tab10")
    for cue in cues:
        lane = lanes.index(cue.speaker or "speech")
        axes.broken_barh([(cue.start, max(cue.end - cue.start, 0.05))], (lane - 0.4, 0.8), color=colours(lane % 10), alpha=0.7)
        label = cue.text if len(cue.text) <= LABEL_CHARACTERS else cue.text[: LABEL_CHARACTERS - 1] + "…"
        axes.text(cue.start, lane, " " + label, va="center", ha="left", fontsize=7, clip_on=True)
    axes.set_yticks(range(len(lanes)), lanes)
    axes.set_xlim(0, duration)
    axes.set_ylim(-0.6, len(lanes) - 0.4)
    axes.set_xlabel("seconds")
    axes.set_title(title or "speaker timeline")
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
