"""A live session's transcript as it becomes final: lines to show now, the whole to save at the end.

Each ``TranscriptSegment`` (a sentence of one speaker) is a line as soon as it arrives; without
speakers (no diarization), each turn's ``TranscriptCompleted`` text is one. ``result()`` is the
session in the file path's answer shape (``text``, ``chunks``, ``speakers``; the chunks are the timed words
with their speakers when the segments carry them, as the file path's are), so every output writer (txt, srt,
vtt, json) serves a live session as it serves a file, under the same subtitle rules. Separate decodes meet at
the seams of turns and cuts, so the answer is made to hold what one decode's does: times that never run
backwards (a piece starts no earlier than the one before it ends) and a capital after a sentence end. Pure Python.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from speaker_transcripts.live.events import LiveEvent, TranscriptCompleted, TranscriptSegment
from speaker_transcripts.pipeline.transcript import ends_sentence


class LiveTranscript:
    """Collect a session's final events; ``line_for`` says what to show for each."""

    def __init__(self) -> None:
        self.segments: list[TranscriptSegment] = []
        self.turns: list[TranscriptCompleted] = []  # completed turns whose text came in no segment
        self._segmented: set[str] = set()  # items whose text came in segments
        self._said = ""  # the last line's text: whether the next starts a sentence

    def line_for(self, event: LiveEvent) -> str | None:
        """The line to show for ``event``, or None (deltas and turn bookkeeping show nothing)."""
        if isinstance(event, TranscriptSegment):
            text = _sentence_cased(event.text.strip(), self._said)
            if text != event.text:
                words = [replace(word, text=_sentence_cased(word.text, self._said)) for word in event.words[:1]] + list(event.words[1:])
                event = replace(event, text=text, words=tuple(words))
            self.segments.append(event)
            self._segmented.add(event.item_id)
            self._said = text
            return f"{event.speaker}: {text}"
        if isinstance(event, TranscriptCompleted) and event.item_id not in self._segmented and event.transcript.strip():
            text = _sentence_cased(event.transcript.strip(), self._said)
            self.turns.append(replace(event, transcript=text))
            self._said = text
            return text
        return None

    def result(self) -> dict[str, Any]:
        """The session as the file path answers: ``speakers`` when diarized, ``chunks`` always."""
        pieces = [{"speaker": s.speaker, "text": s.text, "timestamp": [s.start, s.end],
                   "words": [{"text": word.text, "timestamp": [word.start, word.end], "speaker": s.speaker} for word in s.words]}
                  for s in self.segments]
        pieces += [{"text": turn.transcript, "timestamp": [turn.start, turn.end], "words": []} for turn in self.turns]
        pieces.sort(key=lambda piece: piece["timestamp"][0])
        _in_order(pieces)
        _in_order([word for piece in pieces for word in piece["words"]])
        words = [word for piece in pieces for word in piece.pop("words")]
        timed = bool(self.segments) and not self.turns and all(segment.words for segment in self.segments)
        chunks = words if timed else [{"text": piece["text"], "timestamp": piece["timestamp"]} for piece in pieces]
        return {
            "text": " ".join(piece["text"] for piece in pieces),
            "chunks": chunks,
            "speakers": [piece for piece in pieces if "speaker" in piece],
        }


def _in_order(pieces: list[dict[str, Any]]) -> None:
    """Timestamps rounded to the millisecond that never run backwards: each piece starts no earlier than the one before ends."""
    last = 0.0
    for piece in pieces:
        start, end = piece["timestamp"]
        start = round(max(start, last), 3)
        last = round(max(end, start), 3)
        piece["timestamp"] = [start, last]


def _sentence_cased(text: str, before: str) -> str:
    """``text`` with its first letter a capital when it starts a sentence (nothing ``before`` it, or a sentence end)."""
    if before.strip() and not ends_sentence(before):
        return text
    for index, letter in enumerate(text):
        if letter.isalpha():
            return text[:index] + letter.upper() + text[index + 1 :]
        if not letter.isspace() and letter not in "\"'(¿¡":
            return text
    return text
