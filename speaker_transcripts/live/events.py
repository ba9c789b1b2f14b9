"""What a live session tells its client, as typed events (the server maps them to OpenAI's).

Times are on the session's clock: seconds (or milliseconds, where OpenAI counts them) from the
first sample the client sent. An item is one turn of speech: it starts (``SpeechStarted``), stops
(``SpeechStopped``), is committed (``Committed``), and its text arrives as ``TranscriptDelta``s
while it is spoken (interim: decoded from what has been heard so far), then final, in
``TranscriptSegment``s with a speaker each, and whole in ``TranscriptCompleted`` (or
``TranscriptFailed``). The final text is the turn decoded once more, whole, at its end: it may
differ from the deltas joined, as other streaming services' final results differ from their
interim ones; a client shows the deltas while the turn is spoken and replaces them with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from speaker_transcripts.pipeline.transcript import Chunk


@dataclass(frozen=True)
class SpeechStarted:
    item_id: str
    audio_start_ms: int


@dataclass(frozen=True)
class SpeechStopped:
    item_id: str
    audio_end_ms: int


@dataclass(frozen=True)
class Committed:
    item_id: str
    previous_item_id: str | None


@dataclass(frozen=True)
class Cleared:
    """The uncommitted audio was dropped (the client's ``input_audio_buffer.clear``)."""


@dataclass(frozen=True)
class TranscriptDelta:
    """Words as they are heard, never repeated: joined in order, an item's deltas are its interim text
    (its final text is in its segments and ``TranscriptCompleted``). ``ends``: where each of its words
    ends on the session clock (for measuring how soon words arrive)."""

    item_id: str
    delta: str
    ends: tuple[float, ...] = ()


@dataclass(frozen=True)
class TranscriptSegment:
    """A sentence-sized run of one speaker's final words; neither its words nor its speaker change once sent.
    ``words``: the words themselves, timed on the session clock (in process; a client of the server gets the text)."""

    item_id: str
    id: str
    speaker: str
    start: float
    end: float
    text: str
    words: tuple[Chunk, ...] = ()

    @property
    def ends(self) -> tuple[float, ...]:
        """Where each of its words ends (for measuring how soon speakers arrive)."""
        return tuple(word.end for word in self.words)


@dataclass(frozen=True)
class TranscriptCompleted:
    """A turn's whole text; ``start`` and ``end`` (session seconds) are where the turn lies."""

    item_id: str
    transcript: str
    audio_seconds: float
    start: float = 0.0
    end: float = 0.0


@dataclass(frozen=True)
class TranscriptFailed:
    item_id: str
    message: str


@dataclass(frozen=True)
class Backlog:
    """How far the session is behind the audio sent to it (``seconds`` received and not yet worked
    off): ``behind`` when it fell behind or the lag moved, not ``behind`` once it caught up."""

    seconds: float
    behind: bool


LiveEvent = Backlog | SpeechStarted | SpeechStopped | Committed | Cleared | TranscriptDelta | TranscriptSegment | TranscriptCompleted | TranscriptFailed
