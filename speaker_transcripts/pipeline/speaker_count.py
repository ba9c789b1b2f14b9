"""When diarization's speaker count is in doubt, say so, so that a user who knows can pass it.

One case that can be seen in what diarization returns carries many of the wrong counts: **one voice
on a short recording**. When two people trade turns of a second or two, pyannote's 10-s segmentation
can hear one voice throughout, and no clustering threshold separates them. One person talking alone
looks the same to diarization; the transcript's phrase check tells them apart: the two halves of one
person's phrases lie close (``ONE_VOICE_SPREAD``), those of two people's far. Only that evidence
raises the doubt: a recording with too few phrases to measure (dictation, a voice memo, a prompt) is
not questioned.

Two voices whose centroids lie close are not questioned: that distance separated right counts from
wrong ones no better than chance (docs/quality.md, "Why the count warning has only the one-voice
rule"). Only counts diarization chose itself are questioned: with ``num_speakers`` given, there is no
doubt.
"""

from __future__ import annotations

from collections.abc import Sequence

from speaker_transcripts.pipeline.diarization import Turn

SHORT_SPEECH_S = 60.0  # one voice in less speech than this is questioned (a few embeddings per voice at most)
# One voice whose phrases' two halves (phrase_speakers.Checked.spread) lie closer than this is one person. Measured
# (scratch replay of bench/quality/speaker_count.py's sets, 4 December 2026): the 9 one-voice recordings 0.11-0.49 (two
# with too few phrases to tell), the quick exchanges heard as one voice 0.49 (0.493), 0.56, 0.78 (two too few).
ONE_VOICE_SPREAD = 0.5
COUNT_ADVICE = "pass num_speakers if you know how many people spoke"


def count_doubts(turns: Sequence[Turn], spread: float | None = None) -> list[str]:
    """Warnings (none, or one) about the number of speakers in ``turns`` (the exclusive turns the
    words are attributed from: a voice heard only in overlap gets no words), from their total
    speech and, for one voice, the ``spread`` of its phrases (None: not known, so not questioned). Less
    than a second of speech is not questioned: there is nothing to attribute."""
    speakers = {turn.speaker for turn in turns}
    speech = sum(turn.end - turn.start for turn in turns)
    two_people = spread is not None and spread >= ONE_VOICE_SPREAD
    if len(speakers) == 1 and 1.0 <= speech < SHORT_SPEECH_S and two_people:
        heard = f"diarization gave all {speech:.0f} s of speech to one voice"
        return [f"{heard}; in a short exchange of quick turns a second voice can go unheard: {COUNT_ADVICE}"]
    return []
