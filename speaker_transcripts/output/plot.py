"""A PNG timeline of who spoke when, with the words: quicker to check than a transcript.

Laid out like a page: the audio runs left to right in rows of at most a minute (a 10-minute file
is ten rows, not one 40-inch strip; a remainder under 10 s widens the last row), each row with a lane
per speaker (one "speech" lane without diarization), a bar per speaker turn and as many of the turn's
first words as fit, on up to two lines, in the room from the bar's start to the next bar of its lane
(measured as drawn, so no label runs into the next bar or is cut mid-word; none when fewer than two
words fit), in a font a person can read.
Under the bars, a thin strip per lane is the diarization timeline as found, and grey bands mark
overlapping speech (two or more speakers at once), which the one-speaker-at-a-time segments
cannot show. Times read ``m:ss``. Matplotlib's Agg backend needs no display.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ticker import FuncFormatter, MultipleLocator

from speaker_transcripts.output.formats import Cue, cues_from_result
from speaker_transcripts.pipeline.diarization import Turn

ROW_S = 60.0  # seconds of audio per row
TAIL_S = 10.0  # a remainder shorter than this widens the last row instead of making a row of its own
TURN_GAP_S = 1.5  # a speaker's cues this close together are one bar
TITLE_IN = 0.3  # room above the rows for the title
WIDTH_IN = 14.0
LANE_IN = 0.42
FONT_PT = 9
DPI = 100
LABEL_PADDING_PX = 4  # between a label's last glyph and its bar's end
MIN_CUT_WORDS = 2
LABEL_LINES = 2  # a lane is tall enough for two lines of text at FONT_PT


def plot_timeline(result: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """Draw ``result`` (the handler's response) to ``path``; returns the path written."""
    figure = timeline_figure(result, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path


def timeline_figure(result: Mapping[str, Any], title: str = "") -> Figure:
    """The timeline as a matplotlib figure (the caller closes it). Labels are placed last, once
    the layout is final, so each is measured against its bar in the pixels it will be drawn in."""
    cues = speaker_turns(cues_from_result(result))
    timeline = [Turn(str(turn["speaker"]), float(turn["start"]), float(turn["end"])) for turn in result.get("diarization") or []]
    lanes = sorted({cue.speaker or "speech" for cue in cues} | {turn.speaker for turn in timeline}) or ["speech"]
    duration = max([result.get("duration") or 0.0] + [cue.end for cue in cues] + [turn.end for turn in timeline]) or 1.0
    spans = row_spans(duration)
    row_height = LANE_IN * len(lanes) + 0.55
    height = TITLE_IN + 0.15 + row_height * len(spans)
    figure, axes_list = plt.subplots(len(spans), 1, figsize=(WIDTH_IN, height), squeeze=False, dpi=DPI)
    overlaps = overlapped_spans(timeline)
    for row, (axes, (start, end)) in enumerate(zip(axes_list[:, 0], spans, strict=True)):
        for left, right in overlaps:
            axes.axvspan(left, right, color="0.6", alpha=0.3, linewidth=0)
        _draw_timeline(axes, timeline, lanes)
        _draw_row(axes, cues, lanes, start, end, show_label=row == 0)
    if not cues and not timeline:
        axes_list[0, 0].text(duration / 2, 0, "no speech", ha="center", va="center", fontsize=FONT_PT + 2, color="0.4")
    figure.suptitle(title or "speaker timeline", fontsize=FONT_PT + 2)
    figure.tight_layout()  # it keeps room for the suptitle above the rows, and no more
    renderer = figure.canvas.get_renderer()
    font = FontProperties(size=FONT_PT)

    def width_px(text: str) -> float:
        return renderer.get_text_width_height_descent(text, font, ismath=False)[0]

    for axes, (start, end) in zip(axes_list[:, 0], spans, strict=True):
        _label_row(axes, cues, lanes, start, end, width_px)
    return figure


def row_spans(duration: float) -> list[tuple[float, float]]:
    """Rows of ``ROW_S`` seconds; a remainder under ``TAIL_S`` joins the last row instead of a row of
    its own (a file of 7:00.5 is seven rows, not an eighth almost empty one)."""
    rows = max(1, math.ceil((duration - TAIL_S) / ROW_S))
    width = min(ROW_S, duration)
    return [(row * width, duration if row == rows - 1 else (row + 1) * width) for row in range(rows)]


def speaker_turns(cues: Sequence[Cue]) -> list[Cue]:
    """Consecutive cues of one speaker, no more than ``TURN_GAP_S`` apart, as one bar: a bar per
    turn carries a readable label, a bar per sentence (or word) mostly a cut one."""
    turns: list[Cue] = []
    for cue in sorted(cues, key=lambda cue: cue.start):
        last = turns[-1] if turns else None
        if last is not None and last.speaker == cue.speaker and cue.start - last.end <= TURN_GAP_S:
            turns[-1] = Cue(start=last.start, end=max(last.end, cue.end), text=f"{last.text} {cue.text}", speaker=last.speaker)
        else:
            turns.append(cue)
    return turns


def overlapped_spans(turns: Sequence[Turn]) -> list[tuple[float, float]]:
    """The stretches where two or more speakers talk at once, in time order."""
    edges = sorted([(turn.start, 1) for turn in turns] + [(turn.end, -1) for turn in turns])
    spans, talking, opened = [], 0, 0.0
    for time, change in edges:
        if talking >= 2 and time > opened:
            spans.append((opened, time))
        talking += change
        opened = time
    merged: list[tuple[float, float]] = []
    for left, right in spans:
        if merged and left <= merged[-1][1]:
            merged[-1] = (merged[-1][0], right)
        else:
            merged.append((left, right))
    return merged


def _draw_timeline(axes: Axes, timeline: Sequence[Turn], lanes: list[str]) -> None:
    """Each speaker's turns as found, a thin strip at the foot of the speaker's lane."""
    colours = plt.get_cmap("tab10")
    for turn in timeline:
        index = lanes.index(turn.speaker)
        lane = len(lanes) - 1 - index
        axes.broken_barh([(turn.start, turn.end - turn.start)], (lane - 0.45, 0.12), color=colours(index % 10), alpha=0.9)


def _draw_row(axes: Axes, cues: Sequence[Cue], lanes: list[str], start: float, end: float, show_label: bool) -> None:
    colours = plt.get_cmap("tab10")
    for _, index, lane, left, right in _bars(cues, lanes, start, end):
        axes.broken_barh([(left, right - left)], (lane - 0.4, 0.8), color=colours(index % 10), alpha=0.55)
    axes.set_yticks(range(len(lanes)), list(reversed(lanes)), fontsize=FONT_PT)
    axes.set_xlim(start, end)
    axes.set_ylim(-0.6, len(lanes) - 0.4)
    axes.xaxis.set_major_locator(MultipleLocator(_tick_step(end - start)))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda seconds, _: f"{int(seconds // 60)}:{int(seconds % 60):02d}"))
    axes.tick_params(axis="x", labelsize=FONT_PT)
    axes.grid(axis="x", alpha=0.3)
    if show_label:
        axes.set_title("time (m:ss)", fontsize=FONT_PT, loc="right")


def _bars(cues: Sequence[Cue], lanes: list[str], start: float, end: float) -> Iterator[tuple[Cue, int, int, float, float]]:
    """The cues on the row ``[start, end]``, each with its speaker's index, its lane (the first
    speaker on top) and where its bar lies in the row (a zero-length cue still shows)."""
    for cue in cues:
        if cue.end < start or cue.start > end:
            continue
        index = lanes.index(cue.speaker or "speech")
        yield cue, index, len(lanes) - 1 - index, max(cue.start, start), min(max(cue.end, cue.start + 0.05), end)


def _label_row(
    axes: Axes, cues: Sequence[Cue], lanes: list[str], start: float, end: float, width_px: Callable[[str], float]
) -> None:
    """Each bar's text, in the room from its bar's start to the next bar of its lane (or the row's end):
    a turn is mostly shorter than its words, and the lane beside it is empty while others speak. A
    lane's bars never overlap, so neither do their labels."""
    to_pixels = axes.transData.transform
    bars = sorted(_bars(cues, lanes, start, end), key=lambda bar: (bar[2], bar[3]))
    for position, (cue, _, lane, left, _) in enumerate(bars):
        following = bars[position + 1] if position + 1 < len(bars) else None
        room_end = following[3] if following is not None and following[2] == lane else end
        room = to_pixels((room_end, 0))[0] - to_pixels((left, 0))[0] - LABEL_PADDING_PX
        lines = _fitting(cue.text, room, width_px)
        if lines:
            label = "\n".join(" " + line for line in lines)
            axes.text(left, lane, label, va="center", ha="left", fontsize=FONT_PT, linespacing=1.1, clip_on=True)


def _fitting(text: str, room_px: float, width_px: Callable[[str], float], lines: int = LABEL_LINES) -> list[str]:
    """As many whole words of ``text`` as fit on ``lines`` lines of ``room_px`` each (as drawn, after a
    leading space), with an ellipsis when cut; nothing when fewer than ``MIN_CUT_WORDS`` fit (a bar
    labelled "I…" says nothing). Control characters are dropped (no glyph)."""
    words = "".join(character for character in text if character.isprintable()).split()

    def layout(count: int) -> list[str] | None:
        shown = words[:count] if count == len(words) else words[: count - 1] + [words[count - 1].rstrip(",;:.") + "…"]
        return _wrapped(shown, room_px, width_px, lines)

    fitting: list[str] = []
    low, high = 1, len(words)  # binary search: a longer prefix never takes less room
    while low <= high:
        count = (low + high) // 2
        wrapped = layout(count)
        if wrapped is None:
            high = count - 1
        else:
            low = count + 1
            if count == len(words) or count >= MIN_CUT_WORDS:
                fitting = wrapped
    return fitting


def _wrapped(words: Sequence[str], room_px: float, width_px: Callable[[str], float], lines: int) -> list[str] | None:
    """``words`` filled greedily into at most ``lines`` lines of ``room_px``, or None when they do not fit."""
    filled: list[str] = []
    for word in words:
        if filled and width_px(" " + filled[-1] + " " + word) <= room_px:
            filled[-1] += " " + word
        elif width_px(" " + word) <= room_px and len(filled) < lines:
            filled.append(word)
        else:
            return None
    return filled


def _tick_step(span_s: float) -> float:
    """About ten ticks per row, on round numbers of seconds."""
    for step in (1, 2, 5, 10, 15, 30, 60):
        if span_s / step <= 12:
            return step
    return 60
