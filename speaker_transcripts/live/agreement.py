"""Which words of a growing transcript are final: LocalAgreement-2, as in whisper_streaming.

A live session decodes the same growing buffer again and again; each decode is a hypothesis of timed
words whose last words change as more audio arrives. A word is final once two consecutive hypotheses
agree on it and on every word before it (Macháček et al. 2023, ``whisper_online.HypothesisBuffer``),
compared on their letters and digits (case and punctuation aside; exact comparison kept most words
waiting for the turn's end). Words a re-decode repeats before the commit point are dropped
(``NGRAM_WINDOW_S``, ``MAX_NGRAM``). A word that ends ``SETTLED_S`` or more before the end of the audio
a decode heard is committed after that one decode (AlignAtt, SimulStreaming's rule, read off the word
timestamps of the same alignment heads). Final words are never retracted.

Pure Python on ``transcript.Chunk`` words (session seconds): tested without a model.
"""

from __future__ import annotations

from collections.abc import Sequence

from speaker_transcripts.pipeline.transcript import Chunk, spelled

# A word that starts up to this long before the last committed word's end may still be new (word
# times from cross-attention wobble by a frame or two between decodes): whisper_streaming's 0.1 s.
OVERLAP_TOLERANCE_S = 0.1
NGRAM_WINDOW_S = 1.0
MAX_NGRAM = 5
# A word ending this long before the end of the audio heard is settled (AlignAtt's frame threshold:
# SimulStreaming stops 25 frames = 0.5 s before the end). 1.0 s while the deltas were the final text (0.5 cost
# about three words of 139 on bench/live.py); a turn's final text is now its own decode (session.py), and 0.5
# took the word latency from p50 1.78 / p90 2.68 s to 1.58 / 2.42 s (with speakers, scratch timing of both dev conversations).
SETTLED_S = 0.5


def _same(one: Chunk, other: Chunk) -> bool:
    return spelled(one) == spelled(other)


class LocalAgreement:
    """Commit the words two consecutive hypotheses agree on (LocalAgreement-2)."""

    def __init__(self) -> None:
        self.committed: list[Chunk] = []  # final words, in order (the recent ones, for the n-gram check)
        self.tentative: list[Chunk] = []  # the last hypothesis past the committed words
        self.last_end = 0.0  # session seconds: the last committed word's end

    def update(self, hypothesis: Sequence[Chunk], heard_until: float | None = None) -> list[Chunk]:
        """Insert a new hypothesis (words on the session clock) of the audio up to ``heard_until``
        (None: agreement alone); return the newly final words."""
        new = [word for word in hypothesis if word.start > self.last_end - OVERLAP_TOLERANCE_S and word.text.strip()]
        new = self._without_recommitted(new)
        agreed: list[Chunk] = []
        while new:
            agrees = bool(self.tentative) and _same(new[0], self.tentative[0])
            if not agrees and (heard_until is None or new[0].end > heard_until - SETTLED_S):
                break
            if agrees:
                self.tentative.pop(0)
            agreed.append(new.pop(0))
        self.tentative = new
        self._commit(agreed)
        return agreed

    def flush(self) -> list[Chunk]:
        """The end of a turn: the last hypothesis becomes final as it stands."""
        words, self.tentative = self.tentative, []
        self._commit(words)
        return words

    def reset_tentative(self) -> None:
        """Forget the uncommitted tail (audio it came from was cleared)."""
        self.tentative = []

    def _commit(self, words: list[Chunk]) -> None:
        if words:
            self.committed = (self.committed + words)[-MAX_NGRAM:]
            self.last_end = max(self.last_end, words[-1].end)

    def _without_recommitted(self, new: list[Chunk]) -> list[Chunk]:
        """Drop a leading n-gram the hypothesis repeats from the committed words' end."""
        if not new or not self.committed or abs(new[0].start - self.last_end) >= NGRAM_WINDOW_S:
            return new
        for size in range(min(len(self.committed), len(new), MAX_NGRAM), 0, -1):
            tail = " ".join(spelled(word) for word in self.committed[-size:])
            head = " ".join(spelled(word) for word in new[:size])
            if tail == head:
                return new[size:]
        return new
