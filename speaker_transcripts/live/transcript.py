"""A live session's transcript as it becomes final: lines to show now, the whole to save at the end.

Each ``TranscriptSegment`` (a sentence of one speaker) is a line as soon as it arrives; without
speakers (no diarization), each turn's ``TranscriptCompleted`` text is one. ``result()`` is the
session in the file path's answer shape (``text``, ``chunks``, ``speakers``), so every output
writer (txt, srt, vtt, json) serves a live session as it serves a file. Pure Python.
"""

from __future__ import annotations

from typing import Any

from speaker_transcripts.live.events import LiveEvent, TranscriptCompleted, TranscriptSegment


class LiveTranscript:
    """Collect a session's final events; ``line_for`` says what to show for each."""

    def __init__(self) -> None:
        self.segments: list[TranscriptSegment] = []
        self.turns: list[TranscriptCompleted] = []  # completed turns whose text came in no segment
        self._segmented: set[str] = set()  # items whose text came in segments

    def line_for(self, event: LiveEvent) -> str | None:
        """The line to show for ``event``, or None (deltas and turn bookkeeping show nothing)."""
        if isinstance(event, TranscriptSegment):
            self.segments.append(event)
            self._segmented.add(event.item_id)
            return f"{event.speaker}: {event.text}"
        if isinstance(event, TranscriptCompleted) and event.item_id not in self._segmented and event.transcript.strip():
            self.turns.append(event)
            return event.transcript.strip()
        return None

    def result(self) -> dict[str, Any]:
        """The session as the file path answers: ``speakers`` when diarized, ``chunks`` always."""
        pieces = [{"speaker": s.speaker, "text": s.text, "timestamp": [round(s.start, 3), round(s.end, 3)]} for s in self.segments]
        pieces += [{"text": turn.transcript.strip(), "timestamp": [round(turn.start, 3), round(turn.end, 3)]} for turn in self.turns]
        pieces.sort(key=lambda piece: piece["timestamp"][0])
        chunks = [{"text": piece["text"], "timestamp": piece["timestamp"]} for piece in pieces]
        return {
            "text": " ".join(piece["text"] for piece in pieces),
            "chunks": chunks,
            "speakers": [piece for piece in pieces if "speaker" in piece],
        }
