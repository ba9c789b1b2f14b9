"""Where a live turn's decoded buffer is cut, so its words become final (with their speakers) while the turn goes on.

A turn's words are final, and go out in segments with a speaker, once the stretch they lie in is cut
off the decoded buffer and decoded once more, whole (``session.py``). A turn that runs on without a
pause (a phone call, a quick exchange, a meeting) would otherwise wait for its end or for the
buffer to outgrow Whisper's window. So the buffer is cut at the latest of:

- the end of a sentence among the words already sent (``ends_sentence``), once the stretch before it
  is ``MIN_STRETCH_S`` long;
- a change of speaker the live diarizer's final timeline sees between two of those words (the first
  word of the new speaker covered by the timeline), at the end of the last word before it;

and, where neither comes, past ``FORCE_TRIM_S`` at the last word sent (mid-sentence), so a decode
never hears more than Whisper's window. A cut at a sentence end or a speaker change ``closes`` a
segment: the words before it may go out whole. Pure Python on ``transcript.Chunk`` words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from speaker_transcripts.pipeline.transcript import Chunk, ends_sentence

MIN_STRETCH_S = 1.0  # a stretch shorter than this is not decoded on its own (Whisper hears a lone word worse)
FORCE_TRIM_S = 25.0  # past this, cut at the last final word even mid-sentence


@dataclass(frozen=True)
class Cut:
    """Cut the buffer at ``seconds`` (session clock); ``closes``: the words before it end a segment."""

    seconds: float
    closes: bool


def cut_point(words: Sequence[Chunk], speakers: Sequence[str] | None, buffer_start: float, heard_until: float,
              horizon: float = 0.0) -> Cut | None:
    """Where to cut a buffer that starts at ``buffer_start`` and was heard up to ``heard_until``, given
    its ``words`` sent so far (in order) and, when the session has speakers, each word's speaker on the
    final timeline (``speakers``, read up to ``horizon``); None: not yet."""
    inside = [index for index, word in enumerate(words) if word.end > buffer_start]
    if not inside:
        return None
    candidates: list[Cut] = []
    for index in inside:
        word = words[index]
        if word.end - buffer_start < MIN_STRETCH_S:
            continue
        changes_speaker = (speakers is not None and index + 1 < len(words) and words[index + 1].end <= horizon
                           and speakers[index] != speakers[index + 1])
        if ends_sentence(word.text) or changes_speaker:
            candidates.append(Cut(word.end, closes=True))
    if candidates:
        return candidates[-1]
    if heard_until - buffer_start > FORCE_TRIM_S:
        return Cut(words[inside[-1]].end, closes=False)
    return None
