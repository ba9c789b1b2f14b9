"""Transcript writers shared by the server and the CLI: JSON, plain text, SRT and WebVTT.

They take the handler's response (``chunks`` and, when diarized, ``speakers``) so every transport
renders the same result the same way. The details that usually go wrong are pinned by tests here
(hours past 99 minutes, rounding that never runs an end before its start, ``None`` or negative
times, blank text, WebVTT's reserved ``&``, ``<``, ``>`` and ``-->``). Speakers appear as ``SPEAKER:
text`` in SRT and text, and as WebVTT voice spans (``<v SPEAKER>text``).

Subtitles follow the usual broadcast rules (``SubtitleRules``: two lines of 42 characters, 7 s at
most, 0.8 s at least where the next cue leaves room, a new cue for a new speaker). Cues are laid out
from word times when the response has them (diarized requests always do, ``config.timed_by_words``);
otherwise a long segment is split at word boundaries with its time shared out by characters. Plain
text reads as prose: a line per sentence, or a paragraph per speaker turn when diarized.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from speaker_transcripts.pipeline.transcript import Chunk, ends_sentence, group_words

OutputFormat = Literal["json", "txt", "srt", "vtt", "rttm"]
OUTPUT_FORMATS: tuple[str, ...] = ("json", "txt", "srt", "vtt", "rttm")
SUBTITLE_FORMATS: tuple[str, ...] = ("srt", "vtt")
MAX_CUE_LABEL_CHARS = 20  # a speaker label takes at most this much of a cue's first line (42 characters)
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
    return _cues_of(speakers if speakers else result.get("chunks") or [])


def _cues_of(items: Sequence[Mapping[str, Any]]) -> list[Cue]:
    cues = []
    for item in items:
        text = _one_line(str(item.get("text") or ""))
        if not text:
            continue
        start, end = (list(item.get("timestamp") or []) + [None, None])[:2]
        start = _seconds(start)
        cues.append(Cue(start=start, end=max(start, _seconds(end, default=start)), text=text, speaker=item.get("speaker")))
    return cues


@dataclass(frozen=True)
class SubtitleRules:
    """Limits every subtitle cue keeps (the common broadcast and streaming style guides)."""

    max_line_chars: int = 42
    max_lines: int = 2
    max_cue_s: float = 7.0
    min_cue_s: float = 0.8  # unless the next cue starts sooner
    max_pause_s: float = 1.0  # a longer pause between words ends the cue (nothing stays on screen over silence)

    def __post_init__(self) -> None:
        if self.max_line_chars < 8 or self.max_lines < 1 or self.max_cue_s <= 0 or not 0 <= self.min_cue_s <= self.max_cue_s:
            raise ValueError(f"unusable subtitle rules: {self}")


def render(
    result: Mapping[str, Any], output_format: OutputFormat, rules: SubtitleRules | None = None, uri: str = "audio"
) -> str:
    """The response in ``output_format`` (``json`` is the handler's response itself; ``rttm`` names
    the recording ``uri``)."""
    if output_format == "rttm":
        if "diarization" not in result:
            raise ValueError("rttm is the speaker timeline: it needs a diarized result (diarization was off)")
        return to_rttm(result["diarization"], uri)
    if output_format == "json":
        return json.dumps(result, ensure_ascii=False, indent=2) + "\n"
    if output_format == "txt":
        return to_txt(paragraphs(result))
    if output_format == "srt":
        return to_srt(subtitle_cues(result, rules))
    if output_format == "vtt":
        return to_vtt(subtitle_cues(result, rules, label_shown=False))
    raise ValueError(f"unknown output format {output_format!r}; choose one of {', '.join(OUTPUT_FORMATS)}")


def paragraphs(result: Mapping[str, Any]) -> list[Cue]:
    """Prose: sentence segments, joined into one paragraph per speaker turn when diarized."""
    cues = cues_from_result(result)
    if not result.get("speakers") and _are_words(cues):
        chunks = group_words([Chunk(f" {cue.text}", cue.start, cue.end) for cue in cues])
        return [Cue(chunk.start, chunk.end, chunk.text) for chunk in chunks]
    joined: list[Cue] = []
    for cue in cues:
        if joined and cue.speaker is not None and cue.speaker == joined[-1].speaker:
            joined[-1] = Cue(joined[-1].start, cue.end, f"{joined[-1].text} {cue.text}", cue.speaker)
        else:
            joined.append(cue)
    return joined


def subtitle_cues(result: Mapping[str, Any], rules: SubtitleRules | None = None, label_shown: bool = True) -> list[Cue]:
    """Cues that keep ``rules``, from the response's words when it has them, else its segments
    (speaker segments when diarized). Every word appears once, in order, spelled and spaced as
    Whisper wrote it ("5%" stays "5%" though its words are "5" and "%"). ``label_shown``: the
    speaker label takes room on the first line (SRT's ``SPEAKER_00: ``); WebVTT's voice span
    (``<v SPEAKER_00>``) takes none."""
    rules = rules or SubtitleRules()
    chunks = result.get("chunks") or []
    units = _cues_of(chunks)
    attributed = not result.get("speakers") or all(unit.speaker for unit in units)
    if units and _are_words(units) and attributed:
        units = _glued(chunks, units)
    else:
        units = cues_from_result(result)
    units = [word for unit in units for word in _words(unit, rules, label_shown)]
    groups: list[list[Cue]] = []
    current: list[Cue] = []
    for word in units:
        if current and not _joins(current, word, rules, label_shown):
            groups.append(current)
            current = []
        current.append(word)
    if current:
        groups.append(current)
    cues = [_cue_of(group, rules, label_shown) for group in _without_orphans(groups, rules, label_shown)]
    return _held_long_enough(cues, rules)


def _glued(chunks: Sequence[Mapping[str, Any]], words: list[Cue]) -> list[Cue]:
    """Word cues with a word Whisper wrote without a space before it ("%", "'s") joined to the one
    before (the blank chunks ``_cues_of`` dropped are skipped here too)."""
    texts = [str(chunk.get("text") or "") for chunk in chunks if _one_line(str(chunk.get("text") or ""))]
    joined: list[Cue] = []
    for text, word in zip(texts, words, strict=True):
        if joined and not text[:1].isspace() and joined[-1].speaker == word.speaker:
            last = joined[-1]
            joined[-1] = Cue(last.start, max(last.end, word.end), last.text + word.text, last.speaker)
        else:
            joined.append(word)
    return joined


def _without_orphans(groups: list[list[Cue]], rules: SubtitleRules, label_shown: bool = True) -> list[list[Cue]]:
    """A cue of one word that only finishes the sentence before it ("screen.") is hard to read
    alone: it takes the previous cue's last word (same speaker, no pause between, the lines still
    fit), as a subtitler would break the sentence."""
    for index in range(1, len(groups)):
        before, orphan = groups[index - 1], groups[index]
        if len(orphan) != 1 or len(before) < 3 or ends_sentence(before[-1].text):
            continue
        if orphan[0].speaker != before[-1].speaker or orphan[0].start - before[-1].end > rules.max_pause_s:
            continue
        moved = [before[-1], *orphan]
        if _wrapped([word.text for word in moved], orphan[0].speaker, rules, label_shown) is not None:
            groups[index - 1], groups[index] = before[:-1], moved
    return groups


def rule_breaks(cues: Sequence[Cue], rules: SubtitleRules | None = None) -> list[str]:
    """Which cues break ``rules``, one line each (empty when none does): for tests and benchmarks."""
    rules = rules or SubtitleRules()
    problems = []
    for index, cue in enumerate(cues):
        lines = cue.text.split("\n")
        first = _labelled_line(lines[0], cue.speaker)
        widths = [len(first)] + [len(line) for line in lines[1:]]
        following = cues[index + 1].start if index + 1 < len(cues) else math.inf
        if len(lines) > rules.max_lines or max(widths) > rules.max_line_chars:
            problems.append(f"cue {index + 1}: {len(lines)} lines, widest {max(widths)} characters")
        if cue.end - cue.start > rules.max_cue_s + 1e-6:
            problems.append(f"cue {index + 1}: {cue.end - cue.start:.2f} s on screen")
        if cue.end - cue.start < rules.min_cue_s - 1e-6 and following - cue.start >= rules.min_cue_s:
            problems.append(f"cue {index + 1}: {cue.end - cue.start:.2f} s on screen, though the next cue leaves room")
    return problems


def _are_words(units: Sequence[Cue]) -> bool:
    """True when every unit is one word. Word-level responses are; a segment-level response whose
    segments are all single words lays out the same way either way."""
    return all(len(unit.text.split()) <= 1 for unit in units)


def _label_width(speaker: str | None, label_shown: bool) -> int:
    """Characters the speaker label takes on a cue's first line."""
    return len(_labelled_line("", speaker)) if label_shown else 0


def _words(unit: Cue, rules: SubtitleRules, label_shown: bool = True) -> list[Cue]:
    """A segment as words, its time shared out in proportion to their characters; a word wider
    than a line (a URL, or text written without spaces) is cut into line-wide pieces."""
    width = max(rules.max_line_chars - _label_width(unit.speaker, label_shown), 1)
    tokens = [token[start : start + width] for token in unit.text.split() for start in range(0, len(token), width)]
    total = sum(len(token) + 1 for token in tokens)
    words, position = [], 0
    for token in tokens:
        start = unit.start + (unit.end - unit.start) * position / total
        position += len(token) + 1
        words.append(Cue(start, unit.start + (unit.end - unit.start) * position / total, token, unit.speaker))
    return words


def _joins(current: Sequence[Cue], word: Cue, rules: SubtitleRules, label_shown: bool = True) -> bool:
    """Whether ``word`` may join the cue being built: same speaker, no long pause, still short
    enough on screen and on its lines, and, once the cue has been readable long enough, not
    after the end of a sentence (a sentence end is where a cue best ends)."""
    first, last = current[0], current[-1]
    if word.speaker != first.speaker or word.start - last.end > rules.max_pause_s:
        return False
    if word.end - first.start > rules.max_cue_s:
        return False
    if ends_sentence(last.text) and last.end - first.start >= rules.min_cue_s:
        return False
    return _wrapped([*(cue.text for cue in current), word.text], first.speaker, rules, label_shown) is not None


def _cue_of(words: Sequence[Cue], rules: SubtitleRules, label_shown: bool = True) -> Cue:
    lines = _wrapped([word.text for word in words], words[0].speaker, rules, label_shown) or [" ".join(word.text for word in words)]
    end = min(words[-1].end, words[0].start + rules.max_cue_s)  # a word Whisper stretched over a pause
    return Cue(words[0].start, end, "\n".join(lines), words[0].speaker)


def _wrapped(words: Sequence[str], speaker: str | None, rules: SubtitleRules, label_shown: bool = True) -> list[str] | None:
    """The words on at most ``max_lines`` lines of ``max_line_chars`` (the label counts on the
    first line where it is shown), lines as even as possible; None when they do not fit."""
    label = _label_width(speaker, label_shown)
    for count in range(1, rules.max_lines + 1):
        lines = _even_split(list(words), count, label, rules.max_line_chars)
        if lines is not None:
            return lines
    return None


def _even_split(words: list[str], count: int, label: int, width: int) -> list[str] | None:
    """Split into ``count`` lines, the widest as narrow as possible, and no line ending on a word that
    belongs to the next one (``_break_cost``): exhaustive, as ``count`` is at most a few."""
    best = _best_split(words, count, label, width)
    return best[2] if best else None


def _best_split(words: list[str], count: int, label: int, width: int) -> tuple[int, int, list[str]] | None:
    """(widest line, cost of the breaks, lines) of the best split into ``count`` lines, or None."""
    if count == 1:
        line = " ".join(words)
        return (len(line) + label, 0, [line]) if len(line) + label <= width else None
    best: tuple[int, int, list[str]] | None = None
    for cut in range(1, len(words)):
        head = " ".join(words[:cut])
        if len(head) + label > width:
            break
        rest = _best_split(words[cut:], count - 1, 0, width)
        if rest is not None:
            candidate = (max(len(head) + label, rest[0]), rest[1] + _break_cost(words[cut - 1]), [head, *rest[2]])
            if best is None or sum(candidate[:2]) < sum(best[:2]):
                best = candidate
    return best


STRANDED = frozenset({"a", "an", "the"})


def _break_cost(word: str) -> int:
    """What ending a line after ``word`` costs, in characters of width: an article or a one-letter word
    ("... Oh, hello. I" / "didn't know") is stranded from the words it belongs to; a sentence or clause
    end is where a reader pauses anyway."""
    if word.endswith((".", "?", "!")):
        return -6
    bare = word.strip("\"'()[]").lower()
    if bare in STRANDED or len(bare.rstrip(",;:")) <= 1:
        return 20
    return -3 if word.endswith((",", ";", ":")) else 0


def _held_long_enough(cues: list[Cue], rules: SubtitleRules) -> list[Cue]:
    """Short cues stay up to ``min_cue_s``, but never into the next cue. A cue the next one would
    cut short (a 20-ms "Oh," before the other speaker's answer) takes time from the start of that
    next cue instead, as long as the next keeps ``min_cue_s`` of its own: a cue shown for a
    blink cannot be read, and a next cue shown a moment late still can."""
    held = list(cues)
    for index, cue in enumerate(held):
        wanted = cue.start + rules.min_cue_s
        if index + 1 < len(held):
            following = held[index + 1]
            if following.start < wanted:
                later = max(following.start, min(wanted, following.end - rules.min_cue_s))
                held[index + 1] = Cue(later, following.end, following.text, following.speaker)
            wanted = min(wanted, held[index + 1].start)
        held[index] = Cue(cue.start, max(cue.end, wanted), cue.text, cue.speaker)
    return held


def to_txt(cues: Sequence[Cue]) -> str:
    """One line per cue; ``SPEAKER: text`` when diarized."""
    return "".join(f"{_labelled(cue)}\n" for cue in cues)


def to_srt(cues: Sequence[Cue]) -> str:
    """SubRip: numbered cues, ``HH:MM:SS,mmm`` times, a blank line after each cue."""
    blocks = [f"{number}\n{_timing(cue, ',')}\n{_labelled(cue, in_cue=True)}\n" for number, cue in enumerate(cues, start=1)]
    return "\n".join(blocks)


def to_vtt(cues: Sequence[Cue]) -> str:
    """WebVTT with escaped text; a diarized cue is a voice span ``<v SPEAKER>text</v>``."""
    blocks = ["WEBVTT\n"]
    for cue in cues:
        text = "\n".join(_vtt_escape(line) for line in _lines(cue.text))
        if cue.speaker:
            text = f"<v {_vtt_escape(cue.speaker)}>{text}</v>"
        blocks.append(f"{_timing(cue, '.')}\n{text}\n")
    return "\n".join(blocks)


def to_rttm(turns: Sequence[Mapping[str, Any]], uri: str) -> str:
    """NIST RTTM, as pyannote and dscore read it: a ``SPEAKER`` line per turn of the timeline,
    overlapping turns included. Its fields are separated by spaces, so whitespace inside the
    recording's or a speaker's name becomes ``_``."""
    name = _rttm_field(uri)
    lines = [
        f"SPEAKER {name} 1 {_seconds(turn['start']):.3f} {max(_seconds(turn['end']) - _seconds(turn['start']), 0.0):.3f} "
        f"<NA> <NA> {_rttm_field(str(turn['speaker']))} <NA> <NA>\n"
        for turn in turns
    ]
    return "".join(lines)


def _rttm_field(text: str) -> str:
    return "_".join(text.split()) or "_"


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


def _labelled(cue: Cue, in_cue: bool = False) -> str:
    lines = _lines(cue.text) or [""]
    return "\n".join([_labelled_line(lines[0], cue.speaker, in_cue), *lines[1:]])


def _labelled_line(line: str, speaker: str | None, in_cue: bool = True) -> str:
    """``SPEAKER: line``; in a subtitle cue a name longer than ``MAX_CUE_LABEL_CHARS`` is shortened
    (with "…"), so the words keep a line's width whatever the name (a 36-character name left four
    characters a line: "forw ard")."""
    if not speaker:
        return line
    label = _one_line(speaker)
    if in_cue and len(label) > MAX_CUE_LABEL_CHARS:
        label = label[: MAX_CUE_LABEL_CHARS - 1].rstrip() + "…"
    return f"{_srt_safe(label)}: {line}"


def _srt_safe(label: str) -> str:
    """A speaker label as SRT and text show it: players read ``<...>`` as markup and ``{...}`` as
    style overrides in SubRip, so a name holding them would style the cue or vanish."""
    return label.translate(_MARKUP_LOOKALIKES)


_MARKUP_LOOKALIKES = str.maketrans({"<": "‹", ">": "›", "{": "(", "}": ")"})


def _lines(text: str) -> list[str]:
    """The cue's lines as laid out, each on one line; a blank line would end an SRT or WebVTT cue."""
    return [line for line in (_one_line(part) for part in text.split("\n")) if line]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _vtt_escape(text: str) -> str:
    # With ">" escaped, "-->" cannot appear in cue text either.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
