"""Transcript writers shared by the server and the CLI: JSON, plain text, SRT and WebVTT.

They take the handler's response (``chunks`` and, when diarized, ``speakers``) so every
transport renders the same result the same way. The subtitle writers are small on purpose:
SRT and WebVTT are simple, and the details that usually go wrong are pinned by tests here
(hours past 99 minutes, millisecond rounding that never runs an end before its start,
``None`` or negative times, blank text, and WebVTT's reserved ``&``, ``<``, ``>`` and ``-->``).
Speaker labels appear as ``SPEAKER: text`` in SRT and text, and as WebVTT voice spans
(``<v SPEAKER>text``), which players show or style.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

OutputFormat = Literal["json", "txt", "srt", "vtt"]
OUTPUT_FORMATS: tuple[str, ...] = ("json", "txt", "srt", "vtt")
MAX_SECONDS = 1e7  # about 115 days: any real timestamp fits, and milliseconds stay exact integers


@dataclass(frozen=True)
class Cue:
    """One timed line of transcript, with its speaker when the audio was diarized."""

    start: float
    end: float
    text: str
    speaker: str | None = None


def cues_from_result(result: Mapping[str, Any]) -> list[Cue]:
    """Speaker segments when there are any, otherwise the transcript chunks; blank text is dropped."""
    speakers = result.get("speakers") or []
    items = speakers if speakers else result.get("chunks") or []
    cues = []
    for item in items:
        text = _one_line(str(item.get("text") or ""))
        if not text:
            continue
        start, end = (list(item.get("timestamp") or []) + [None, None])[:2]
        start = _seconds(start)
        cues.append(Cue(start=start, end=max(start, _seconds(end, default=start)), text=text, speaker=item.get("speaker")))
    return cues


def render(result: Mapping[str, Any], output_format: OutputFormat) -> str:
    """The response in ``output_format`` (``json`` is the handler's response itself)."""
    if output_format == "json":
        return json.dumps(result, ensure_ascii=False, indent=2) + "\n"
    cues = cues_from_result(result)
    if output_format == "txt":
        return to_txt(cues)
    if output_format == "srt":
        return to_srt(cues)
    if output_format == "vtt":
        return to_vtt(cues)
    raise ValueError(f"unknown output format {output_format!r}; choose one of {', '.join(OUTPUT_FORMATS)}")


def to_txt(cues: Sequence[Cue]) -> str:
    """One line per cue; ``SPEAKER: text`` when diarized."""
    return "".join(f"{_labelled(cue)}\n" for cue in cues)


def to_srt(cues: Sequence[Cue]) -> str:
    """SubRip: numbered cues, ``HH:MM:SS,mmm`` times, a blank line after each cue."""
    blocks = [f"{number}\n{_timing(cue, ',')}\n{_labelled(cue)}\n" for number, cue in enumerate(cues, start=1)]
    return "\n".join(blocks)


def to_vtt(cues: Sequence[Cue]) -> str:
    """WebVTT with escaped text; a diarized cue is a voice span ``<v SPEAKER>text</v>``."""
    blocks = ["WEBVTT\n"]
    for cue in cues:
        text = _vtt_escape(_one_line(cue.text))
        if cue.speaker:
            text = f"<v {_vtt_escape(cue.speaker)}>{text}</v>"
        blocks.append(f"{_timing(cue, '.')}\n{text}\n")
    return "\n".join(blocks)


def timestamp(seconds: float, decimal_marker: str) -> str:
    """``HH:MM:SS<marker>mmm``, rounded to the millisecond; hours grow past 99 if they must."""
    return _clock(_milliseconds(seconds), decimal_marker)


def _clock(milliseconds: int, decimal_marker: str) -> str:
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole_seconds, milliseconds = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole_seconds:02d}{decimal_marker}{milliseconds:03d}"


def _timing(cue: Cue, decimal_marker: str) -> str:
    """The cue's timing line. Players skip a cue whose end is not after its start, so an instant
    (or an end that rounds onto its start) gets one visible millisecond, counted in integers."""
    start = _milliseconds(cue.start)
    end = max(_milliseconds(cue.end), start + 1)
    return f"{_clock(start, decimal_marker)} --> {_clock(end, decimal_marker)}"


def _milliseconds(seconds: float) -> int:
    return round(_seconds(seconds) * 1000)


def _seconds(value: Any, default: float = 0.0) -> float:
    """A usable time: numbers pass (up to ``MAX_SECONDS``), ``None``/NaN/infinity take ``default``,
    negatives become 0."""
    if value is None or isinstance(value, bool):
        return min(max(default, 0.0), MAX_SECONDS)
    number = float(value)
    if not math.isfinite(number):
        return min(max(default, 0.0), MAX_SECONDS)
    return min(max(number, 0.0), MAX_SECONDS)


def _labelled(cue: Cue) -> str:
    text = _one_line(cue.text)
    return f"{cue.speaker}: {text}" if cue.speaker else text


def _one_line(text: str) -> str:
    """A blank line ends an SRT or WebVTT cue, so cue text never spans lines."""
    return " ".join(text.split())


def _vtt_escape(text: str) -> str:
    # With ">" escaped, "-->" cannot appear in cue text either.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
