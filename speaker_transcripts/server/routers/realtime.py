"""Live transcription over a WebSocket: ``GET /v1/realtime?intent=transcription``, OpenAI's Realtime protocol.

The client streams base64 PCM in ``input_audio_buffer.append`` events; the server answers with turns
(``speech_started`` / ``speech_stopped`` / ``committed``), words as they become final (``...delta``),
sentence-sized segments with their speaker (``...segment``) and each turn's whole text
(``...completed``). The shapes are in ``realtime_protocol``, the session in ``live.session``.

Bounds (``ServerSettings``, docs/live.md and docs/configuration.md): sessions at once, idle time, a
session's age, a frame's size (Uvicorn's ``ws_max_size``), and the work a session may have pending:
``LIVE_MAX_BACKLOG_S`` of audio and at most ``MAX_PENDING_EVENTS`` other events (``MAX_PENDING_UPDATES``
of them ``session.update``). Past either bound the server stops reading the socket until the session
catches up, so a fast client is slowed by TCP instead of filling memory; keepalive pings do not time
out meanwhile. Events take effect in the order sent. With ``API_KEY``, the key (or a client secret)
comes in ``Authorization: Bearer`` or the subprotocol ``openai-insecure-api-key.<key>``, never the query
string. ``Connection`` runs over a ``Transport``: this WebSocket, or a WebRTC call (``realtime_calls``).
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from speaker_transcripts.config import parse_parameters, resolve_request
from speaker_transcripts.errors import InvalidRequestError, RequestAbandoned
from speaker_transcripts.live.backlog import LagWatch
from speaker_transcripts.live.capacity import TEXT_ONLY_COST, LiveCapacity, session_cost
from speaker_transcripts.live.events import Cleared, LiveEvent, TranscriptFailed
from speaker_transcripts.live.session import LiveConfig, LiveSession, NothingToCommit
from speaker_transcripts.pipeline.audio import PcmStream
from speaker_transcripts.server.client_secrets import ClientSecret
from speaker_transcripts.server.errors import logger
from speaker_transcripts.server.middleware import WRONG_KEY
from speaker_transcripts.server.realtime_protocol import (
    ProtocolError,
    SessionSettings,
    audio_of,
    error_event,
    new_id,
    parse_event,
    requested_rate,
    server_event,
    session_object,
    updated_settings,
)
from speaker_transcripts.server.realtime_transport import Pcm, Transport, WebSocketTransport

router = APIRouter()
MAX_PENDING_EVENTS = 64  # events other than audio read but not yet applied (commits, clears, updates)
MAX_PENDING_UPDATES = 2  # of which session.update: each may hold a frame of known-speaker clips
BROWSER_KEY_PREFIX = "openai-insecure-api-key."
REALTIME_SUBPROTOCOL = "realtime"


SLOT_WAIT_S = 3.0  # a new session waits this long for a session whose end has not begun yet (its close frame in flight)
ENDING_WAIT_S = 60.0  # ... and this long for one that is ending (its client gone, its thread finishing a step)


class LiveSlots:
    """The live sessions running now, admitted by cost (``live.capacity``: a session takes a text-only
    session's cost when it opens and a session with speakers' once its first audio says it has them, all
    within ``budget``); their threads, one per session; the lookahead each session's turns get."""

    def __init__(self, capacity: LiveCapacity) -> None:
        self.limit = capacity.max_sessions
        self.budget = capacity.budget
        self.lookahead_s = capacity.lookahead_s
        self.active = 0
        self.used = 0  # the cost of the active sessions
        self.ending = 0  # of the active: sessions whose end has begun; each frees its slot once its thread's step is done
        self.changed = asyncio.Event()
        self.costs = threading.Lock()  # ``used`` changes in the event loop (take, give_back) and in a session's thread (grow)
        self.executor = ThreadPoolExecutor(max_workers=max(self.budget // TEXT_ONLY_COST, 1), thread_name_prefix="live")

    def _reserve(self) -> bool:
        with self.costs:
            if self.used + TEXT_ONLY_COST > self.budget:
                return False
            self.used += TEXT_ONLY_COST
            self.active += 1
            return True

    async def take(self, wait_s: float = SLOT_WAIT_S) -> Slot | None:
        """A slot, or None when there stays no room. A client that opens its next session as soon as
        the last one closed is not refused as busy: it waits ``wait_s`` for that session's end to begin
        (its close frame crosses the new connection), then for as long as the ending session's thread
        takes to finish its step (on a busy machine, seconds), up to ``ENDING_WAIT_S``."""
        started = time.monotonic()
        while not self._reserve():
            self.changed.clear()
            waited = time.monotonic() - started
            patience = ENDING_WAIT_S if self.ending else wait_s
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=max(patience - waited, 0.0))
            except TimeoutError:
                if not self.ending or time.monotonic() - started >= ENDING_WAIT_S:
                    return None
        return Slot(self)


class Slot:
    """One session's hold on ``LiveSlots``: ``grow`` to a session with speakers' cost, ``ending`` when its
    end begins, ``give_back`` once (its thread done)."""

    def __init__(self, slots: LiveSlots) -> None:
        self.slots = slots
        self.cost = TEXT_ONLY_COST
        self.is_ending = False
        self.given_back = False

    def grow(self, diarize: bool) -> bool:
        """Take the cost of the session as its first audio starts it; False (and nothing taken) when it does not fit."""
        cost = session_cost(diarize)
        with self.slots.costs:
            if self.slots.used - self.cost + cost > self.slots.budget:
                return False
            self.slots.used += cost - self.cost
            self.cost = cost
            return True

    def ending(self) -> None:
        if not self.is_ending and not self.given_back:
            self.is_ending = True
            self.slots.ending += 1
            self.slots.changed.set()

    def give_back(self) -> None:
        if not self.given_back:
            self.given_back = True
            with self.slots.costs:
                self.slots.active -= 1
                self.slots.used -= self.cost
            self.slots.ending -= self.is_ending
            self.slots.changed.set()


class AtCapacity(Exception):
    """A session's first audio asks for speakers and the server has no room for a session with them."""


def _offered_key(websocket: WebSocket) -> tuple[bytes | None, bool]:
    """The key the client sent (``Authorization: Bearer`` or the browser subprotocol) and
    whether it sent more than one ``Authorization`` header."""
    authorizations = [value for name, value in websocket.scope["headers"] if name == b"authorization"]
    if authorizations:
        scheme, _, token = authorizations[0].partition(b" ")
        return (token.strip() if scheme.lower() == b"bearer" else None), len(authorizations) > 1
    for protocol in websocket.scope.get("subprotocols", []):
        if protocol.startswith(BROWSER_KEY_PREFIX):
            return protocol.removeprefix(BROWSER_KEY_PREFIX).encode(), False
    return None, False


@router.websocket("/v1/realtime")
async def realtime(websocket: WebSocket) -> None:
    """OpenAI's Realtime API, transcription sessions (``?intent=transcription``; ``model`` is accepted and ignored)."""
    app = websocket.app
    settings = app.state.settings
    key, twice = _offered_key(websocket)
    secret: ClientSecret | None = app.state.client_secrets.check(key)
    if settings.api_key is not None:
        expected = settings.api_key.get_secret_value().encode()
        if twice or key is None or not (hmac.compare_digest(key, expected) or secret is not None):
            app.state.metrics.live_refused.labels("auth").inc()
            message = "send one Authorization header, not several" if twice else WRONG_KEY + " (a browser: the subprotocol openai-insecure-api-key.<API_KEY>)"
            await websocket.send_denial_response(JSONResponse({"error": message}, status_code=400 if twice else 401))
            return
    offered = websocket.scope.get("subprotocols", [])
    await websocket.accept(subprotocol=REALTIME_SUBPROTOCOL if REALTIME_SUBPROTOCOL in offered else None)
    intent = websocket.query_params.get("intent", "transcription")
    if intent != "transcription":
        await _refuse(websocket, INTENT_REFUSED.format(intent=intent), "invalid_intent", 1008)
        return
    slot = await admit(app)
    if slot is None:
        await _refuse(websocket, busy_message(app), "server_busy", 1013, kind="server_error")
        return
    release = releaser(app, slot)
    beta = websocket.headers.get("openai-beta", "").startswith("realtime")
    try:
        await connection(app, WebSocketTransport(websocket), slot, release, beta, secret).run()
    finally:
        release()


INTENT_REFUSED = "intent {intent!r} is not served here: this server runs transcription sessions (?intent=transcription)"


async def admit(app: Any) -> Slot | None:
    """A live slot for a new session at a text-only session's cost (``LiveSlots.take``), counted; None
    (counted as refused) at capacity. The session takes its own cost with its first audio (``connection``)."""
    slot = await app.state.live.take()
    if slot is None:
        app.state.metrics.live_refused.labels("capacity").inc()
    else:
        app.state.metrics.live_sessions.inc()
    return slot


def busy_message(app: Any) -> str:
    slots: LiveSlots = app.state.live
    return (f"the server is at capacity ({slots.limit} live sessions with speakers or {slots.budget // TEXT_ONLY_COST} text-only, "
            "LIVE_MAX_SESSIONS); try again later")


def releaser(app: Any, slot: Slot) -> Callable[[], None]:
    """Free ``slot`` once: before the closing frame goes out, so a client that opens its next
    session as soon as this one closes finds the slot free."""

    def release() -> None:
        if not slot.given_back:
            slot.give_back()
            app.state.metrics.live_sessions.dec()

    return release


def connection(app: Any, transport: Transport, slot: Slot, release: Callable[[], None], beta: bool = False,
               secret: ClientSecret | None = None) -> Connection:
    """The session of one admitted client, over ``transport``; a client secret's configuration first."""
    slots: LiveSlots = app.state.live

    def costed(diarize: bool) -> None:
        """Called in the session's thread as its first audio starts it: its cost taken, or ``AtCapacity``."""
        if not slot.grow(diarize):
            app.state.metrics.live_refused.labels("capacity").inc()
            raise AtCapacity(busy_message(app))

    return Connection(transport, app.state.handler, app.state.settings, slots.executor, release, slot.ending,
                      alone=lambda: slots.active <= 1, lookahead_s=slots.lookahead_s, admit=costed, beta=beta,
                      start=secret.session if secret is not None else None)


async def _refuse(websocket: WebSocket, message: str, code: str, close_code: int, kind: str = "invalid_request_error") -> None:
    await websocket.send_json(error_event(message, code, kind=kind))
    await websocket.close(close_code, reason=code)


class ClientGone(Exception):
    """The client left or stopped reading: nobody is left to answer."""


class Connection:
    """One accepted session: a reader of client events, a worker running the session in a thread
    (events in order, audio that piled up meanwhile taken in one go), and the limits in time."""

    def __init__(self, transport: Transport, handler: Any, settings: Any, executor: ThreadPoolExecutor,
                 release: Callable[[], None] = lambda: None, ending: Callable[[], None] = lambda: None,
                 alone: Callable[[], bool] = lambda: True, lookahead_s: float = 0.0,
                 admit: Callable[[bool], None] = lambda diarize: None, beta: bool = False,
                 start: dict[str, Any] | None = None) -> None:
        self.transport = transport
        self.start = start  # a client secret's session configuration: applied before session.created
        self.handler = handler
        self.limits = settings
        self.executor = executor
        self.release = release
        self.ending = ending  # said once the session's end has begun (client gone, idle, expired, closing)
        self.alone = alone  # whether no other live session is open now (LiveSession.alone: the lookahead)
        self.lookahead_s = lookahead_s
        self.admit = admit  # the session's cost taken as its first audio starts it (``AtCapacity`` when it does not fit)
        self.id = new_id("sess")
        self.beta = beta
        self.settings = SessionSettings()  # as the session's thread has applied them, in the order sent
        self.voices: dict[str, Any] = {}  # known speakers' embeddings, made when they are set
        self.expires_at = time.time() + settings.live_max_session_s
        self.inbox: asyncio.Queue[tuple[str, Any, str | None]] = asyncio.Queue()
        self.read_rate = self.settings.rate  # the rate of the audio being read: for the backlog's seconds only
        self.audio_read = False  # whether the reader has taken audio (the rate is fixed from then on)
        self.backlog = 0.0  # seconds of audio received, not yet processed
        self.in_flight = 0.0  # seconds of audio the session's thread is working on now
        self.lag = LagWatch()  # says when backlog + in_flight is past what real time allows, and when it is back
        self.pending = {"events": 0, "updates": 0}  # other events received, not yet applied
        self.caught_up = asyncio.Event()
        self.session: LiveSession | None = None
        self.stream: PcmStream | None = None
        self.stopped = threading.Event()  # set: the session's thread stops at its next decoder step
        self.running: asyncio.Future[Any] | None = None  # the session's thread at work

    async def send(self, event: dict[str, Any]) -> None:
        """Send one event; a client that is gone, or stops reading for ``WRITE_TIMEOUT_S``, ends the session."""
        if not self.transport.connected:
            raise ClientGone
        try:
            await asyncio.wait_for(self.transport.send(event), timeout=self.limits.write_timeout_s)
        except (TimeoutError, WebSocketDisconnect, RuntimeError, OSError) as error:
            self.stopped.set()
            raise ClientGone from error

    async def close(self, code: int) -> None:
        """Close the connection unless the client already has."""
        await self.transport.close(code)

    async def run(self) -> None:
        kind = "transcription_session.created" if self.beta else "session.created"
        reader = asyncio.ensure_future(self._read())
        worker = asyncio.ensure_future(self._work())
        try:
            if self.start is not None:  # checked when it was minted; what the models refuse is said, the session goes on
                try:
                    await asyncio.get_running_loop().run_in_executor(
                        self.executor, self._update, updated_settings(self.settings, {"type": "session.update", "session": self.start}))
                    self.read_rate = self.settings.rate
                except InvalidRequestError as error:
                    await self.send(error_event(f"the client secret's session: {error}", getattr(error, "code", "invalid_value")))
            await self.send({"type": kind, "event_id": new_id("event"), "session": self._session_object()})
            done, _ = await asyncio.wait({reader, worker}, timeout=max(self.expires_at - time.time(), 0.0),
                                         return_when=asyncio.FIRST_COMPLETED)
            self.ending()
            if worker not in done:
                if not done:  # the session's time is up: the open turn is finished, then the session closes
                    await self.send(error_event(f"the session reached its limit of {self.limits.live_max_session_s:g} s "
                                                "(LIVE_MAX_SESSION_S)", "session_expired"))
                if reader in done and reader.result() == "gone":
                    raise ClientGone
                await self.inbox.put(("close", None, None))  # idle, or expired: finish what was sent
                await worker
        except ClientGone:
            self.stopped.set()
            self.ending()
        finally:
            reader.cancel()
            worker.cancel()
            if self.running is not None:  # the thread stops within a decoder step; the slot frees after it
                await asyncio.wait([self.running])
                failed = None if self.running.cancelled() else self.running.exception()  # taken, or asyncio logs it as never retrieved
                if failed is not None and not isinstance(failed, RequestAbandoned):
                    logger.error("live session %s: its last step failed: %r", self.id, failed)
        for task in (reader, worker):
            if task.done() and not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), ClientGone):
                logger.error("live session %s failed: %r", self.id, task.exception())

    def _session_object(self) -> dict[str, Any]:
        return session_object(self.id, self.settings, self.handler.configured.asr_model, self.expires_at, self.beta)

    async def _read(self) -> str:
        """Read client events until the client leaves ("gone") or sends no audio for ``LIVE_IDLE_TIMEOUT_S`` ("idle")."""
        idle_at = time.monotonic() + self.limits.live_idle_timeout_s
        while True:
            try:
                frame = await asyncio.wait_for(self.transport.receive(), timeout=max(idle_at - time.monotonic(), 0.0))
            except TimeoutError:
                await self.send(error_event(f"no event for {self.limits.live_idle_timeout_s:g} s (LIVE_IDLE_TIMEOUT_S); "
                                            "closing the session", "session_idle"))
                return "idle"
            if frame is None:
                return "gone"
            if isinstance(frame, Pcm):  # a call's track: the same path as an append's audio
                if await self._append(frame.samples, None):
                    idle_at = time.monotonic() + self.limits.live_idle_timeout_s
                continue
            client_event_id = None
            try:
                event = parse_event(frame or b"")
                client_event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
                if await self._accept(event, client_event_id):
                    idle_at = time.monotonic() + self.limits.live_idle_timeout_s
            except ProtocolError as error:
                await self.send(error_event(str(error), error.code, error.param, client_event_id))
            except InvalidRequestError as error:
                await self.send(error_event(str(error), "invalid_value", None, client_event_id))

    async def _accept(self, event: dict[str, Any], client_event_id: str | None) -> bool:
        """Queue one client event for the session's thread, in order; False if it carried no audio.
        The reader waits (and TCP slows the client) while the session has as much pending as it may."""
        kind = event["type"]
        if kind == "input_audio_buffer.append":
            if self.transport.media_rate is not None:
                raise ProtocolError("this session's audio comes in the call's audio track, not in events", "invalid_event", "type")
            return await self._append(audio_of(event), client_event_id)
        update = kind in ("session.update", "transcription_session.update")
        await self._room(lambda: self.pending["events"] < MAX_PENDING_EVENTS and (not update or self.pending["updates"] < MAX_PENDING_UPDATES))
        self.pending["events"] += 1
        if update:
            self.pending["updates"] += 1
            if not self.audio_read:  # after audio the rate cannot change: the session refuses such an update
                self.read_rate = requested_rate(event) or self.read_rate
            await self.inbox.put(("update", event, client_event_id))
        else:
            await self.inbox.put((kind.removeprefix("input_audio_buffer."), None, client_event_id))
        return False

    async def _append(self, pcm: bytes, client_event_id: str | None) -> bool:
        """Queue audio for the session's thread once the backlog has room; False if it was empty."""
        await self._room(lambda: self.backlog <= self.limits.live_max_backlog_s)
        seconds = len(pcm) / 2 / (self.transport.media_rate or self.read_rate)
        self.audio_read = self.audio_read or len(pcm) > 0
        self.backlog += seconds
        await self.inbox.put(("audio", (pcm, seconds), client_event_id))
        await self._report_lag()
        return len(pcm) > 0

    async def _room(self, has_room: Callable[[], bool]) -> None:
        """Wait until the session has worked off enough of what is pending."""
        while not has_room():
            self.caught_up.clear()
            await self.caught_up.wait()

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.inbox.get()]
            while not self.inbox.empty():
                batch.append(self.inbox.get_nowait())
            for kind, value, client_event_id in _coalesced(batch):
                self._taken(kind, value)
                step = self.running = loop.run_in_executor(self.executor, self._apply, kind, value)
                try:
                    events = await asyncio.shield(step)  # cancelling the worker leaves the thread's step to be waited for
                except ProtocolError as error:
                    if kind == "update":
                        self.read_rate = self.settings.rate  # refused: the audio is still read at the rate in force
                    await self.send(error_event(str(error), error.code, error.param, client_event_id))
                    continue
                except InvalidRequestError as error:
                    for event in error.settled if isinstance(error, NothingToCommit) else []:
                        await self.send(server_event(event))
                    await self.send(error_event(str(error), "invalid_value", None, client_event_id))
                    continue
                except RequestAbandoned:
                    return
                except AtCapacity as error:
                    await self.send(error_event(str(error), "server_busy", kind="server_error"))
                    self.release()
                    await self.close(1013)
                    return
                finally:
                    if step.done():  # cancelled while the thread works on: run() waits for the step before the slot frees
                        self.running = None
                    self.in_flight = 0.0
                if kind == "audio":
                    await self._report_lag()
                if kind == "update":
                    await self.send({"type": ("transcription_session.updated" if self.beta else "session.updated"),
                                     "event_id": new_id("event"), "session": self._session_object()})
                for event in events:
                    await self.send(server_event(event))
                if kind == "close":
                    self.release()
                    await self.close(1000)
                    return

    def _taken(self, kind: str, value: Any) -> None:
        """The session's thread takes an event: it no longer counts as pending, and a reader waiting for room goes on."""
        if kind == "audio":
            self.backlog -= value[1]
            self.in_flight = value[1]
        elif kind != "close":
            self.pending["events"] -= 1
            self.pending["updates"] -= kind == "update"
        self.caught_up.set()

    async def _report_lag(self) -> None:
        """Tell the client when the session falls behind, how far as that changes, and when it caught up."""
        if (event := self.lag.observe(self.backlog + self.in_flight)) is not None:
            await self.send(server_event(event))

    def _apply(self, kind: str, value: Any) -> list[LiveEvent]:
        """One client command on the session, in the session's thread; the session starts with the first audio."""
        if self.stopped.is_set():
            raise RequestAbandoned("the client left")
        if kind == "update":
            self._update(updated_settings(self.settings, value))
            return []
        if kind == "audio":  # at the rate the updates applied so far set
            self.stream = self.stream or PcmStream(self.transport.media_rate or self.settings.rate)
            value = self.stream(value[0])
        if self.session is None:
            if kind == "commit":
                raise InvalidRequestError("the input audio buffer is empty; nothing to commit")
            if kind != "audio":
                return [Cleared()] if kind == "clear" else []
            config = self._live_config()
            self.admit(config.diarize)
            self.session = LiveSession(self.handler, config, new_id=new_id, should_stop=self.stopped.is_set)
        session = self.session
        session.shedding = self.lag.shedding  # late: fewer interim decodes until it has caught up
        session.alone = self.alone()
        open_item = session.item.id if session.item is not None else None
        actions: dict[str, Callable[[], list[LiveEvent]]] = {
            "audio": lambda: session.append(value), "commit": session.commit, "clear": session.clear, "close": session.close,
        }
        try:
            return actions[kind]()
        except (InvalidRequestError, RequestAbandoned):
            raise
        except Exception as error:  # noqa: BLE001 (a bug or a device failure: said for the turn, the session goes on)
            logger.error("live session %s: %r", self.id, error, exc_info=error)
            session.item = None
            return [TranscriptFailed(open_item or new_id("item"), "the turn could not be transcribed; the server log has the details")]

    def _update(self, settings: SessionSettings) -> None:
        """Check a new configuration against the loaded models (a file request's rules) and apply it."""
        if self.stream is not None and settings.rate != self.settings.rate and self.transport.media_rate is None:
            raise ProtocolError("the audio format cannot change once audio was sent", "invalid_value", "session.audio.input.format")
        speakers = ("diarize", "known_speakers", "voices")
        if self.stream is not None and any(getattr(settings, name) != getattr(self.settings, name) for name in speakers):
            raise ProtocolError("diarize, known_speakers and voices are set before the first audio is sent", "invalid_value",
                                "session.audio.input.transcription")
        parameters: dict[str, Any] = {"language": settings.language, "prompt": settings.prompt,
                                      "known_speakers": [speaker.model_dump() for speaker in settings.known_speakers]}
        for name in ("diarize", "voices"):
            if getattr(settings, name) is not None:
                parameters[name] = getattr(settings, name)
        config = resolve_request(parse_parameters(parameters)[0], self.handler.capabilities).config
        settings = settings.model_copy(update={"language": config.language, "voices": config.voices})
        if self.session is None:
            self.voices = self.handler.voice_embeddings(settings.known_speakers) if settings.known_speakers else {}
            self.handler.chosen_voices(config.voices)  # a name not enrolled: an error event now, not at the first audio
        self.settings = settings
        if self.session is not None:
            self.session.update(self._live_config())

    def _live_config(self) -> LiveConfig:
        diarize = self.settings.diarize if self.settings.diarize is not None else self.handler.capabilities.has_diarization
        library = self.handler.library_for(False, self.handler.chosen_voices(self.settings.voices))
        known = {**library, **self.voices}  # the voice library's people (those chosen), then the session's
        return LiveConfig(language=self.settings.language, prompt=self.settings.prompt, turn_detection=self.settings.turn_detection,
                          diarize=bool(diarize), known_speakers=known, lookahead_s=self.lookahead_s)


def _coalesced(batch: list[tuple[str, Any, str | None]]) -> list[tuple[str, Any, str | None]]:
    """Consecutive audio appends as one (the session decodes what piled up in one go)."""
    merged: list[tuple[str, Any, str | None]] = []
    for kind, value, client_event_id in batch:
        if kind == "audio" and merged and merged[-1][0] == "audio":
            pieces, seconds = merged[-1][1]
            merged[-1] = ("audio", ([*pieces, value[0]], seconds + value[1]), client_event_id)
        else:
            merged.append((kind, ([value[0]], value[1]) if kind == "audio" else value, client_event_id))
    return [(kind, (b"".join(value[0]), value[1]) if kind == "audio" else value, event_id) for kind, value, event_id in merged]
