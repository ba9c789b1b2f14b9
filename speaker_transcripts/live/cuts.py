"""Where a live turn's decoded buffer is cut, so its words become final (with their speakers) while the turn goes on.

A turn's words go out in segments with a speaker once the stretch they lie in is cut off the decoded
buffer and decoded once more, whole (``session.py``); a turn that runs on without a pause would
otherwise wait for its end. The buffer is cut at the latest sentence end among the words sent (once
the stretch before it is ``MIN_STRETCH_S`` long) or change of speaker the live diarizer's final
timeline sees; where neither comes, once the buffer is ``CLAUSE_S`` long, at the last clause end sent
or else the longest pause of ``PAUSE_S`` or more; past ``RUN_ON_S`` at the last word sent, so that no
word waits for its speaker more than a few seconds. A cut ends a segment too. Pure Python on
``transcript.Chunk`` words.
"""

from __future__ import annotations

from collections.abc import Sequence

from speaker_transcripts.pipeline.transcript import Chunk, ends_sentence

MIN_STRETCH_S = 1.0  # a stretch shorter than this is not decoded on its own (Whisper hears a lone word worse)
CLAUSE_S = 4.0  # a buffer this long without a sentence end is cut at a clause end or a pause
CLAUSE_ENDINGS = (",", ";", ":")
PAUSE_S = 0.25
RUN_ON_S = 6.0  # past this, cut at the last word sent even mid-sentence


def cut_point(words: Sequence[Chunk], speakers: Sequence[str] | None, buffer_start: float, heard_until: float,
              horizon: float = 0.0) -> float | None:
    """Where to cut a buffer that starts at ``buffer_start`` and was heard up to ``heard_until``, given
    its ``words`` sent so far (in order) and, when the session has speakers, each word's speaker on the
    final timeline (``speakers``, read up to ``horizon``): the cut's time on the session clock, where a
    segment ends too; None: not yet."""
    inside = [index for index, word in enumerate(words) if word.end > buffer_start]
    if not inside:
        return None
    candidates: list[float] = []
    for index in inside:
        word = words[index]
        if word.end - buffer_start < MIN_STRETCH_S:
            continue
        changes_speaker = (speakers is not None and index + 1 < len(words) and words[index + 1].end <= horizon
                           and speakers[index] != speakers[index + 1])
        if ends_sentence(word.text) or changes_speaker:
            candidates.append(word.end)
    if candidates:
        return candidates[-1]
    if heard_until - buffer_start > CLAUSE_S:
        usable = [index for index in inside if words[index].end - buffer_start >= MIN_STRETCH_S]
        clauses = [index for index in usable if words[index].text.strip().endswith(CLAUSE_ENDINGS)]
        if clauses:
            return words[clauses[-1]].end
        pauses = [(words[index + 1].start - words[index].end, index) for index in usable if index + 1 < len(words)]
        widest = max(pauses, default=(0.0, -1))
        if widest[0] >= PAUSE_S:
            return words[widest[1]].end
    if heard_until - buffer_start > RUN_ON_S and words[inside[-1]].end - buffer_start >= MIN_STRETCH_S:
        return words[inside[-1]].end
    return None
