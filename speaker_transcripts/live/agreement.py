"""Which words of a growing transcript are final: LocalAgreement-2, as in whisper_streaming.

A live session decodes the same growing buffer again and again; each decode is a hypothesis of
timed words, and its last words change as more audio arrives ("for" becomes "forward", "ten"
gains its full stop). A word is final once two consecutive hypotheses agree on it and on every
word before it (Macháček et al. 2023, ``whisper_online.HypothesisBuffer``): the longest common
prefix of the last two hypotheses, compared word by word on their letters and digits (case and
punctuation aside: "morning" and "morning," agree, and the newer hypothesis' spelling is the one
kept; compared exactly, as whisper_streaming does, most words of a turn waited for its end: p50 word
latency 4.4 s on the dev conversations). Final words are never retracted; the uncommitted tail is
what the next decode may still change.

The buffer is re-decoded from its start, so a hypothesis repeats words already committed: words
that end before the last committed word's end are dropped, and where the hypothesis starts within
``NGRAM_WINDOW_S`` of the commit point with up to ``MAX_NGRAM`` words already committed (a word
that straddles the commit time), those are dropped too (``HypothesisBuffer.insert``).

A word far enough from the end of the audio a decode heard is committed after that one decode
(AlignAtt, Simul-Whisper / SimulStreaming: decoding stops where the alignment heads' attention
reaches the last frames, and what came before is committed): ``update(hypothesis, heard_until)``
also commits the hypothesis' words up to the first that ends within ``SETTLED_S`` of
``heard_until``. The word times come from those same alignment heads (word timestamps), so it is
AlignAtt's rule read off the words; LocalAgreement still commits what two decodes agree on sooner.

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
