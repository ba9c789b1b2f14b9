"""OpenAI's Realtime API in transcription mode: the client events we read and the server events we write.

The shapes follow OpenAI's published reference (the GA ``session.update`` with ``session.type =
"transcription"`` and ``session.audio.input.{format, transcription, turn_detection}``, and the beta
``transcription_session.update`` with its flat ``input_audio_format`` / ``input_audio_transcription``
/ ``turn_detection``); both set the same ``SessionSettings``. Extensions, inside
``transcription``: ``diarize`` (speakers on, the default when the server has a diarization model)
and ``known_speakers`` (``[{"name", "audio"}]``, as on the file routes). Audio is base64 16-bit
mono PCM at 24 kHz (OpenAI's) or 16 kHz. Anything else is answered with an ``error`` event that
names the field, and the session goes on.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from speaker_transcripts.config import KnownSpeaker
from speaker_transcripts.errors import InvalidRequestError, shown
from speaker_transcripts.live.events import (
    Backlog,
    Cleared,
    Committed,
    LiveEvent,
    SpeechStarted,
    SpeechStopped,
    TranscriptCompleted,
    TranscriptDelta,
    TranscriptFailed,
    TranscriptSegment,
)
from speaker_transcripts.live.turns import TurnDetection
from speaker_transcripts.server.openai_format import MODEL_NAME

RATES = (24000, 16000)  # OpenAI's pcm16 rate, and Whisper's own
CLIENT_EVENTS = ("session.update", "transcription_session.update", "input_audio_buffer.append", "input_audio_buffer.commit", "input_audio_buffer.clear")


class SessionSettings(BaseModel):
    """The effective settings of one live session."""

    model_config = ConfigDict(frozen=True)

    rate: Literal[24000, 16000] = 24000
    model: str | None = None
    language: str | None = None
    prompt: str | None = Field(default=None, max_length=2000)  # the file routes' bound
    turn_detection: TurnDetection | None = Field(default_factory=TurnDetection)
    diarize: StrictBool | None = None  # "yes" is not a yes: refused, as the file routes refuse it
    known_speakers: tuple[KnownSpeaker, ...] = ()
    voices: tuple[str, ...] | None = None  # the voice library's people who may be named (None: all)

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        """Echoed in every ``session.updated``: a model name as the file routes take it, or refused."""
        if value is not None and not MODEL_NAME.fullmatch(value):
            raise ValueError(f"{shown(value)} is not a model name (letters, digits and ._:/@+- only, at most 128); "
                             "any name is accepted, the server's ASR_MODEL decodes")
        return value


class ProtocolError(InvalidRequestError):
    """A client event we cannot act on: answered with an ``error`` event, the session goes on."""

    def __init__(self, message: str, code: str = "invalid_event", param: str | None = None) -> None:
        super().__init__(message)
        self.code, self.param = code, param


def parse_event(text: str | bytes) -> dict[str, Any]:
    """A client frame as a JSON object with a known ``type``."""
    try:
        event = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: brackets nested thousands deep
        raise ProtocolError("the event is not valid JSON; send one JSON object per text frame", "invalid_json") from None
    if not isinstance(event, dict):
        raise ProtocolError(f"an event is a JSON object, got {type(event).__name__}", "invalid_event")
    kind = event.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("the event has no 'type'", "invalid_event", "type")
    if kind not in CLIENT_EVENTS:
        raise ProtocolError(
            f"unknown event type {shown(kind)}; a transcription session takes {', '.join(CLIENT_EVENTS)}", "unknown_event_type", "type"
        )
    return event


def audio_of(event: dict[str, Any]) -> bytes:
    """The PCM bytes of an ``input_audio_buffer.append``."""
    audio = event.get("audio")
    if not isinstance(audio, str):
        raise ProtocolError("input_audio_buffer.append needs 'audio': base64 of 16-bit mono PCM", "invalid_audio", "audio")
    try:
        pcm = base64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("'audio' is not valid base64", "invalid_audio", "audio") from None
    if len(pcm) % 2:
        raise ProtocolError(f"'audio' holds {len(pcm)} bytes; 16-bit PCM comes in whole 2-byte samples", "invalid_audio", "audio")
    return pcm


def updated_settings(current: SessionSettings, event: dict[str, Any]) -> SessionSettings:
    """``current`` with what a ``session.update`` (GA) or ``transcription_session.update`` (beta)
    sets; fields the event leaves out keep their value, ``turn_detection: null`` turns it off."""
    session = event.get("session")
    if not isinstance(session, dict):
        raise ProtocolError(f"{event['type']} needs a 'session' object", "invalid_event", "session")
    if event["type"] == "session.update":
        if session.get("type", "transcription") != "transcription":
            raise ProtocolError(
                f"this server runs transcription sessions only; session.type {shown(session.get('type'))} is not supported",
                "invalid_value", "session.type",
            )
        audio_input = _object(session.get("audio", {}), "session.audio").get("input", {})
        audio_input = _object(audio_input, "session.audio.input")
        format_, transcription = audio_input.get("format"), audio_input.get("transcription")
        turn_key, prefix = "turn_detection", "session.audio.input"
        rate = _ga_rate(format_) if format_ is not None else None
    else:
        audio_input, transcription = session, session.get("input_audio_transcription")
        turn_key, prefix = "turn_detection", "session"
        rate = _beta_rate(session["input_audio_format"]) if "input_audio_format" in session else None
    changes: dict[str, Any] = {}
    if rate is not None:
        changes["rate"] = rate
    if transcription is not None:
        transcription = _object(transcription, f"{prefix}.transcription")
        for name in ("model", "language", "prompt", "diarize"):
            if name in transcription:
                changes[name] = transcription[name] or None if name != "diarize" else transcription[name]
        if "known_speakers" in transcription:
            changes["known_speakers"] = transcription["known_speakers"] or ()
        if "voices" in transcription:
            changes["voices"] = transcription["voices"]
    if turn_key in audio_input:
        detection = audio_input[turn_key]
        if detection is not None:
            detection = _object(detection, f"{prefix}.turn_detection")
            if detection.get("type", "server_vad") not in ("server_vad", "semantic_vad"):
                raise ProtocolError(
                    f"turn_detection.type {shown(detection.get('type'))} is not supported; use server_vad (or null to commit yourself)",
                    "invalid_value", f"{prefix}.turn_detection.type",
                )
        changes["turn_detection"] = detection
    try:
        return SessionSettings.model_validate({**current.model_dump(), **changes})
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ProtocolError(f"{where}: {problem['msg'].removeprefix('Value error, ')}", "invalid_value", where) from None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"'{where}' must be an object, got {type(value).__name__}", "invalid_value", where)
    return value


def _ga_rate(format_: Any) -> int:
    format_ = _object(format_, "session.audio.input.format")
    if format_.get("type", "audio/pcm") != "audio/pcm":
        raise ProtocolError(
            f"audio format {shown(format_.get('type'))} is not supported; send audio/pcm (16-bit mono) at 24000 or 16000 Hz",
            "invalid_value", "session.audio.input.format.type",
        )
    rate = format_.get("rate", 24000)
    if type(rate) is not int or rate not in RATES:  # 16000.0 and True are not rates
        raise ProtocolError(f"audio/pcm at {shown(rate)} Hz is not supported; use 24000 or 16000", "invalid_value", "session.audio.input.format.rate")
    return int(rate)


def requested_rate(event: dict[str, Any]) -> int | None:
    """The audio rate a ``session.update`` asks for, if it asks for a valid one: the reader counts the
    audio that follows in seconds with it (the session's thread checks the whole update, in order)."""
    session = event.get("session")
    if not isinstance(session, dict):
        return None
    try:
        if event["type"] == "session.update":
            audio = session.get("audio")
            audio_input = audio.get("input") if isinstance(audio, dict) else None
            has_format = isinstance(audio_input, dict) and audio_input.get("format") is not None
            return _ga_rate(audio_input["format"]) if has_format else None  # type: ignore[index]
        return _beta_rate(session["input_audio_format"]) if "input_audio_format" in session else None
    except ProtocolError:
        return None


def _beta_rate(audio_format: Any) -> int:
    if audio_format != "pcm16":
        raise ProtocolError(
            f"input_audio_format {shown(audio_format)} is not supported; send pcm16 (24 kHz mono)", "invalid_value", "session.input_audio_format"
        )
    return 24000


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


def session_object(session_id: str, settings: SessionSettings, served_model: str, expires_at: float, beta: bool) -> dict[str, Any]:
    """The session as ``session.created`` / ``.updated`` show it (``transcription_session.*`` for beta
    clients): the full effective configuration; known speakers by name only, never their audio."""
    detection = settings.turn_detection.model_dump() if settings.turn_detection else None
    transcription = {
        "model": settings.model or served_model,
        "language": settings.language,
        "prompt": settings.prompt or "",
        "diarize": settings.diarize,
        "known_speakers": [{"name": speaker.name} for speaker in settings.known_speakers],
        "voices": None if settings.voices is None else list(settings.voices),
    }
    common = {"id": session_id, "object": "realtime.transcription_session", "expires_at": int(expires_at), "include": None}
    if beta:
        return {**common, "input_audio_format": "pcm16", "input_audio_transcription": transcription, "turn_detection": detection,
                "input_audio_noise_reduction": None}
    audio_input = {"format": {"type": "audio/pcm", "rate": settings.rate}, "transcription": transcription,
                   "turn_detection": detection, "noise_reduction": None}
    return {"type": "transcription", **common, "audio": {"input": audio_input}}


def error_event(message: str, code: str, param: str | None = None, client_event_id: str | None = None,
                kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "event_id": new_id("event"),
            "error": {"type": kind, "code": code, "message": message, "param": param, "event_id": client_event_id}}


def server_event(event: LiveEvent) -> dict[str, Any]:
    """A live session's event as OpenAI's server event."""
    body: dict[str, Any]
    if isinstance(event, Backlog):  # ours: OpenAI's protocol has no word for a session falling behind
        body = {"type": "session.backlog", "behind": event.behind, "seconds": event.seconds}
    elif isinstance(event, SpeechStarted):
        body = {"type": "input_audio_buffer.speech_started", "item_id": event.item_id, "audio_start_ms": event.audio_start_ms}
    elif isinstance(event, SpeechStopped):
        body = {"type": "input_audio_buffer.speech_stopped", "item_id": event.item_id, "audio_end_ms": event.audio_end_ms}
    elif isinstance(event, Committed):
        body = {"type": "input_audio_buffer.committed", "item_id": event.item_id, "previous_item_id": event.previous_item_id}
    elif isinstance(event, Cleared):
        body = {"type": "input_audio_buffer.cleared"}
    elif isinstance(event, TranscriptDelta):
        body = {"type": "conversation.item.input_audio_transcription.delta", "item_id": event.item_id, "content_index": 0,
                "delta": event.delta}
    elif isinstance(event, TranscriptSegment):
        body = {"type": "conversation.item.input_audio_transcription.segment", "item_id": event.item_id, "content_index": 0,
                "id": event.id, "speaker": event.speaker, "start": round(event.start, 3), "end": round(event.end, 3), "text": event.text}
    elif isinstance(event, TranscriptCompleted):
        body = {"type": "conversation.item.input_audio_transcription.completed", "item_id": event.item_id, "content_index": 0,
                "transcript": event.transcript, "usage": {"type": "duration", "seconds": event.audio_seconds}}
    elif isinstance(event, TranscriptFailed):
        body = {"type": "conversation.item.input_audio_transcription.failed", "item_id": event.item_id, "content_index": 0,
                "error": {"type": "transcription_error", "code": "transcription_failed", "message": event.message, "param": None}}
    else:  # pragma: no cover - every LiveEvent is mapped above
        raise TypeError(f"no server event for {type(event).__name__}")
    return {"event_id": new_id("event"), **body}


class EventReader:
    """OpenAI's server events back into live events, for a client of the route (``speaker-transcripts
    live --url``): ``server_event`` read the other way, with each turn's times kept from its
    ``speech_started`` / ``speech_stopped`` for its ``completed``. Other events (session, errors) give None."""

    def __init__(self) -> None:
        self._turns: dict[str, list[float]] = {}

    def __call__(self, event: dict[str, Any]) -> LiveEvent | None:
        kind, item = event.get("type"), event.get("item_id", "")
        if kind == "session.backlog":
            return Backlog(event["seconds"], event["behind"])
        if kind == "input_audio_buffer.speech_started":
            self._turns[item] = [event["audio_start_ms"] / 1000, event["audio_start_ms"] / 1000]
            return SpeechStarted(item, event["audio_start_ms"])
        if kind == "input_audio_buffer.speech_stopped":
            self._turns.setdefault(item, [0.0, 0.0])[1] = event["audio_end_ms"] / 1000
            return SpeechStopped(item, event["audio_end_ms"])
        if kind == "conversation.item.input_audio_transcription.delta":
            return TranscriptDelta(item, event["delta"])
        if kind == "conversation.item.input_audio_transcription.segment":
            return TranscriptSegment(item, event["id"], event["speaker"], event["start"], event["end"], event["text"])
        if kind == "conversation.item.input_audio_transcription.completed":
            start, end = self._turns.pop(item, (0.0, 0.0))
            return TranscriptCompleted(item, event["transcript"], (event.get("usage") or {}).get("seconds", 0.0), start, end)
        if kind == "conversation.item.input_audio_transcription.failed":
            return TranscriptFailed(item, event["error"]["message"])
        return None
