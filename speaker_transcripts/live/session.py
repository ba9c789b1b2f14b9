"""One live session: audio in as it is spoken, words out as soon as they are sure, each turn's speakers within seconds.

The session reuses the file path's stages on the orchestrator's models (one lock for all of them):
Silero decides turns (``turns.TurnDetector``, OpenAI's ``server_vad``); Whisper decodes the turn's
audio so far as one speech piece every ``MIN_STEP_S`` of new audio (``SHED_STEP_S`` while behind),
sized to its buffer; ``agreement.LocalAgreement`` keeps the words two decodes agree on, and those
AlignAtt's rule settles, and sends them as deltas. The buffer is cut within the turn
(``cuts.cut_point``: sentence ends, speaker changes, clause ends, pauses, run-ons) and at its end, and
each stretch cut off is decoded once more, whole, for its final text (growing prefixes mishear a
word at their edges; with a lookahead while alone, a turn's end hears what follows). Speakers come
from ``speakers.LiveDiarizer`` beside the decodes, never waited for but at a turn's end; final words
are labelled by the file path's ``diarization.word_speakers`` once the timeline covers them and sent
as ``TranscriptSegment``s that never change. The measurements behind the constants:
docs/performance.md, "Live sessions" and "Live on real dialogue".
"""

from __future__ import annotations

import math
import secrets
import threading
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from speaker_transcripts.config import InferenceConfig
from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.live.agreement import LocalAgreement
from speaker_transcripts.live.clustering import ClusteringSettings, OnlineClustering, SpokenLabels
from speaker_transcripts.live.cuts import cut_point
from speaker_transcripts.live.events import (
    Cleared,
    Committed,
    LiveEvent,
    SpeechStarted,
    SpeechStopped,
    TranscriptCompleted,
    TranscriptDelta,
    TranscriptSegment,
)
from speaker_transcripts.live.speakers import DiarizerSettings, LiveDiarizer, supports_live_diarization
from speaker_transcripts.live.turns import TurnDetection, TurnDetector
from speaker_transcripts.models.encoder_window import SHORTEST_S
from speaker_transcripts.pipeline.audio import SAMPLING_RATE
from speaker_transcripts.pipeline.diarization import UNKNOWN_SPEAKER, Turn, word_speakers
from speaker_transcripts.pipeline.long_form import Piece
from speaker_transcripts.pipeline.speech_gate import WINDOW
from speaker_transcripts.pipeline.transcript import Chunk, joined_text, segment_ranges

MIN_STEP_S = 0.5  # new audio a decode waits for
SHED_STEP_S = 2.0  # ... while the session is behind (``shedding``): interim decodes are what it can spare
HOLD_S = 0.0  # words ending this close to the end of the audio heard are not final yet
MAX_BUFFER_S = 29.0  # Whisper's window, less the padding it needs; a decode never sees more
PROMPT_CHARS = 200  # recent final text given to Whisper as what was said before (whisper_streaming's 200)
KEEP_BEFORE_S = 2.0  # audio kept before a turn can start (prefix padding)
# Words are labelled with this many of the turn's words sent before them, so a sentence's last word, final after
# the rest of it went out, keeps its sentence's speaker where the timeline is even (``word_speakers``), as on the file path.
LABEL_CONTEXT_WORDS = 12
# A stretch cut off a turn's buffer is decoded for its final words with up to this much of the audio after the cut
# (the words whose middle lies before it kept, ``said_before``): a cut mid-sentence otherwise leaves its last words
# without what follows them, and the dev conversations' final WER rose from 13.5 to 16.9 % (bench/live.py).
CUT_CONTEXT_S = 1.0
MIN_COMMIT_S = 0.1  # OpenAI's: a commit of less audio is an error
# With a lookahead (``LiveConfig.lookahead_s``, the server's LIVE_LOOKAHEAD_S) a turn the turn detector stopped
# gets its final decode once that much audio after its end has come: Whisper hears its last words with what
# follows them (docs/performance.md, "Live sessions": 14.5 -> 11.5 % WER at 3 s; 1.5 s: 13.2 %, 2 s: 12.8 %, 6 s: 12.8 %), for
# one more decode a turn (bench/live.py: two sessions with speakers then fall behind on 2 cores). The value measured best:
LOOKAHEAD_S = 3.0
# A decode's token budget is its buffer's (asr.token_budget) up to this; a longer buffer keeps this
# one's 315 tokens, so that the budget and a 200-character prompt fit Whisper's 448 positions.
BUDGETED_S = 20
# A final decode's encoder window is at least this long (an interim one's: ``encoder_window.SHORTEST_S``, 6 s).
# Whisper learnt on 30-s windows; a 2-5 s turn decoded in a 6-s window is misheard more often ("fixed two mug"
# for "two bugs"): docs/performance.md, "Live sessions" --window, final WER of the dev conversations' turns by the shortest
# window, without lookahead / with 3 s: 6 s 14.5 / 10.8 %, 12 s 11.5 / 10.8 %, 18 s 11.8 / 10.8 %, 30 s
# 12.5 / 10.1 %; the final decodes' CPU time, scratch-timed without lookahead: 15.9, 16.9, 23.3, 35.5 s.
FINAL_WINDOW_S = 12.0
# ... and a final decode that hears what follows the turn (the lookahead) reads Whisper's whole 30-s window:
# 10.8 -> 10.1 % in that replay, the file path's 8.8 % x 1.15, for twice the final decodes' CPU. A session
# does that only while it is the only one on the models (``LiveSession.alone``): two sessions with speakers,
# or three text-only, on 2 cores have no second core's worth to spare (bench/live.py).
LOOKAHEAD_WINDOW_S = 30.0
# That decode costs a second or more on 2 cores; made as soon as its lookahead had come, it fell in the middle
# of the next turn and held that turn's words back (word latency p50 / p90 1.47 / 2.26 s with a 12-s window,
# 1.79 / 3.64 s with the whole one, bench/live.py). It waits for a pause: until no turn is open (the next
# turn stopped, after that turn's own last words went out), but no longer than this after the turn's end.
# Turns shorter than the lookahead stop before the one before them has all of it: several turns may wait.
SETTLE_WITHIN_S = 8.0
# A session's first turn can end before the live diarizer has heard enough of anyone to found a speaker
# (``ClusteringSettings.min_new_speech``: a 0.6-s "They were..." opening a quick exchange); its words then had no
# voice to go to and were sent as UNKNOWN. A stopped turn waits for the first voice instead, up to this much
# final timeline after its end (then UNKNOWN is the truth), unless the client commits it or the session ends.
VOICE_WAIT_S = 10.0


class LiveModels(Protocol):
    """What a session needs of the orchestrator (``pipeline.transcriber.Transcriber``)."""

    recognizer: Any
    speech_gate: Any
    diarization_pipeline: Any

    beside: Any  # an executor the holder of exclusive() may run diarization in, beside Whisper

    def exclusive(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class LiveConfig:
    """A session's settings: ``turn_detection`` None means the client commits each turn itself."""

    language: str | None = None
    prompt: str | None = None
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    diarize: bool = True
    known_speakers: Mapping[str, np.ndarray] = field(default_factory=dict)  # name -> voice embedding
    lookahead_s: float = 0.0  # 0: a stopped turn's final decode at its end, nothing after it heard; LOOKAHEAD_S: see there


class SessionAudio:
    """The session's 16 kHz samples from ``start`` (absolute index) to ``end``; older ones dropped.
    The diarizer reads it from its own thread while the session appends: a lock keeps each call whole."""

    def __init__(self) -> None:
        self._data = np.zeros(SAMPLING_RATE * 8, dtype=np.float32)
        self._used = 0
        self.start = 0
        self._lock = threading.Lock()

    @property
    def end(self) -> int:
        return self.start + self._used

    def append(self, samples: np.ndarray) -> None:
        with self._lock:
            if self._used + len(samples) > len(self._data):
                grown = np.zeros(max(2 * len(self._data), self._used + len(samples)), dtype=np.float32)
                grown[: self._used] = self._data[: self._used]
                self._data = grown
            self._data[self._used : self._used + len(samples)] = samples
            self._used += len(samples)

    def read(self, start: int, end: int) -> np.ndarray:
        """The samples ``[start, end)`` that are still kept (a window reaching before them gets fewer)."""
        with self._lock:
            start = max(start, self.start)
            return self._data[start - self.start : max(min(end, self.end), start) - self.start].copy()

    def drop_before(self, sample: int) -> None:
        with self._lock:
            cut = min(max(sample - self.start, 0), self._used)
            if cut:
                self._data[: self._used - cut] = self._data[cut : self._used]
                self._used -= cut
                self.start += cut


class NothingToCommit(InvalidRequestError):
    """A commit with no audio since the last one (OpenAI's error). A turn that had stopped and was
    waiting for what follows it is final now all the same: its events come before the error, so a
    client that commits at its end and stops at the error has every turn."""

    def __init__(self, message: str, settled: list[LiveEvent]) -> None:
        super().__init__(message)
        self.settled = settled


@dataclass
class _Item:
    id: str
    start: int  # the turn's first sample
    buffer_start: int  # the first sample the next decode hears
    last_decoded: int = 0  # the end of the audio the last decode heard
    words: list[Chunk] = field(default_factory=list)  # words sent as deltas (interim)
    text: str = ""  # the deltas joined
    final: list[Chunk] = field(default_factory=list)  # the turn's final words: cut off the buffer, then its final decode
    end: int = 0  # the turn's last sample, once it stopped
    next_start: int | None = None  # the next turn's first sample, once it started
    sent: int = 0  # final words already sent in segments
    closed: int = 0  # final words that end at a cut (which ends a segment)
    agreement: LocalAgreement = field(default_factory=LocalAgreement)


def said_before(words: list[Chunk], seconds: float) -> list[Chunk]:
    """The words of a decode that heard past ``seconds`` (the next turn's start) that belong before it: those
    whose middle is before it. Cross-attention word times absorb pauses: the turn's last word often ends
    0.1-0.2 s past the next turn's start and the next turn's first word often starts up to 0.2 s before it,
    but on the dev conversations' 17 seams the last word's middle lay 0.29 s or more before it and the first
    word's 0.10 s or more after it (kept by their start, the next turn's first word was kept twice:
    11.5 -> 11.1 % WER with 3 s of lookahead, ``docs/performance.md, "Live sessions"``)."""
    return [word for word in words if (word.start + word.end) / 2 < seconds]


def _ms(sample: int) -> int:
    return sample * 1000 // SAMPLING_RATE


class LiveSession:
    """Feed it audio and commands in order; each call returns the events it produced."""

    def __init__(
        self,
        models: LiveModels,
        config: LiveConfig,
        new_id: Callable[[str], str] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """``should_stop`` saying yes (the client left) ends a decode at its next step with ``RequestAbandoned``."""
        self.models = models
        self.should_stop = should_stop
        self.config = config
        self.new_id = new_id or (lambda prefix: f"{prefix}_{secrets.token_hex(8)}")
        self.audio = SessionAudio()
        self.vad = models.speech_gate.stream()
        self.turns = TurnDetector(config.turn_detection, WINDOW, SAMPLING_RATE) if config.turn_detection else None
        self.last_speech = 0  # end of the latest window Silero heard speech in
        self.windows = 0  # windows Silero has scored
        self.item: _Item | None = None
        self.settling: deque[_Item] = deque()  # stopped turns waiting for lookahead_s of audio (and a pause) before their final decode
        self.unvoiced: deque[tuple[_Item, int]] = deque()  # decoded turns (and where each stopped) waiting for a voice (VOICE_WAIT_S)
        self.previous_item_id: str | None = None
        self.language = config.language
        self.context: deque[Chunk] = deque(maxlen=64)  # recent final words, for the prompt
        self.segments = 0
        self.shedding = False  # set by the session's owner while it is behind the audio (live/backlog.py)
        self.alone = True  # set by the session's owner: no other live session shares the models now
        self.diarizer: LiveDiarizer | None = None
        self.labels = SpokenLabels([*config.known_speakers, UNKNOWN_SPEAKER])  # the clustering's labels as the client sees them
        self._catching_up: Future[Any] | None = None  # the diarizer's step in flight, beside the decodes
        if config.diarize and supports_live_diarization(models.diarization_pipeline):
            clustering = OnlineClustering(ClusteringSettings(), config.known_speakers)
            self.labels.named = clustering.known_name
            self.diarizer = LiveDiarizer(models.diarization_pipeline, clustering, SAMPLING_RATE, DiarizerSettings(), should_stop)

    @property
    def speech_threshold(self) -> float:
        return (self.config.turn_detection or TurnDetection()).threshold

    def update(self, config: LiveConfig) -> None:
        """New settings for the turns to come (language, prompt, turn detection)."""
        if config.turn_detection != self.config.turn_detection:
            self.turns = TurnDetector(config.turn_detection, WINDOW, SAMPLING_RATE) if config.turn_detection else None
            if self.turns is not None:
                self.turns.next_window = self.windows
                self.turns.floor = self.audio.end
        self.config = config
        self.language = config.language or self.language

    def append(self, samples: np.ndarray) -> list[LiveEvent]:
        """Take new audio (16 kHz mono float32): turns that start or stop in it, and any words it firms up."""
        first = self.audio.end
        self.audio.append(samples)
        probabilities = self.vad.probabilities(samples)
        for index, probability in enumerate(probabilities, start=self.windows):
            if probability >= self.speech_threshold:
                self.last_speech = (index + 1) * WINDOW
        self.windows += len(probabilities)
        events: list[LiveEvent] = []
        if self.turns is not None:
            for boundary in self.turns.feed(probabilities):
                if boundary.started and self.item is None:
                    events += self._open(boundary.sample, announced=True)
                elif not boundary.started and self.item is not None:
                    events += self._close(boundary.sample, stopped=True)
        elif self.item is None and len(samples):
            events += self._open(first, announced=False)
        events += self._completions(force=False) + self._step()  # the turns waiting for a voice first: the diarizer is between steps
        while self.settling and self.audio.end >= self.settling[0].end + self.config.lookahead_s * SAMPLING_RATE and (
                self.item is None or self.audio.end >= self.settling[0].end + SETTLE_WITHIN_S * SAMPLING_RATE):
            events += self._settle(self.settling.popleft())  # in a pause, after the open turn's words: what is being said first
        self._drop_old_audio()
        return events

    def commit(self) -> list[LiveEvent]:
        """The client's ``input_audio_buffer.commit``: the turn so far is final now."""
        if self.item is None or self.audio.end - self.item.start < MIN_COMMIT_S * SAMPLING_RATE:
            raise NothingToCommit(
                f"the input audio buffer holds less than {MIN_COMMIT_S * 1000:g} ms of audio since the last commit; nothing to commit",
                self._settle_all() + self._completions(force=True),
            )
        if self.turns is not None:
            self.turns.force_stop(self.audio.end)
        return self._close(self.audio.end, stopped=False)

    def clear(self) -> list[LiveEvent]:
        """The client's ``input_audio_buffer.clear``: the uncommitted turn is dropped."""
        self.item = None
        if self.turns is not None:
            self.turns.force_stop(self.audio.end)
        return [Cleared()]

    def close(self) -> list[LiveEvent]:
        """The end of the session: turns not final yet are finished with what was heard."""
        return self._close(self.audio.end, stopped=False) if self.item is not None else self._settle_all() + self._completions(force=True)

    def _open(self, sample: int, announced: bool) -> list[LiveEvent]:
        item = _Item(id=self.new_id("item"), start=sample, buffer_start=sample, last_decoded=sample)
        if self.settling and self.settling[-1].next_start is None:
            self.settling[-1].next_start = sample
        item.agreement.last_end = sample / SAMPLING_RATE
        self.item = item
        return [SpeechStarted(item.id, _ms(sample))] if announced else []

    def _close(self, end: int, stopped: bool) -> list[LiveEvent]:
        """The turn is over at ``end``. Its final text is decoded now, unless the turn detector stopped
        it and the session has a lookahead, is ``alone`` and is not behind (``shedding``): then its last words go out as
        deltas now and its final text waits for ``lookahead_s`` of what follows (``_settle``). Decoded now,
        it hears nothing after ``end``: the audio after it may hold the next turn's first words, and the
        next turn is not open yet. Turns still settling are final before this one; decoded now, this one's final
        decode comes after theirs; waiting, it joins them (``append`` settles them in a pause: ``SETTLE_WITHIN_S``)."""
        item = self.item
        assert item is not None
        events: list[LiveEvent] = [SpeechStopped(item.id, _ms(end))] if stopped else []
        events.append(Committed(item.id, self.previous_item_id))
        item.end = end
        self.previous_item_id, self.item = item.id, None
        if not stopped or not self.config.lookahead_s or self.shedding or not self.alone:
            events += self._settle_all() + self._settle(item, item.agreement, lookahead=False)
            return events + self._completions(force=not stopped)  # the client's commit, or the session's end: final now
        speech_since = self.last_speech > item.last_decoded  # the last interim decode may have missed the last words
        heard = self._decode_and_diarize(item.buffer_start if speech_since else None, end, final=False,
                                         prefix=self._sent_text(item) if speech_since else "")
        self.settling.append(item)
        return events + self._deliver(item, item.agreement.update(heard) + item.agreement.flush())

    def _settle_all(self) -> list[LiveEvent]:
        """Every turn still settling final now, in order, with what came after each so far."""
        events: list[LiveEvent] = []
        while self.settling:
            events += self._settle(self.settling.popleft())
        return events

    def _settle(self, item: _Item, agreement: LocalAgreement | None = None, lookahead: bool = True) -> list[LiveEvent]:
        """A stopped turn's final decode, over its audio and (``lookahead``) what came after it (up to
        ``lookahead_s``, in Whisper's whole window: ``LOOKAHEAD_WINDOW_S``), keeping the words that belong
        before the next turn (``said_before``); its segments and ``completed`` as soon as a voice can label them
        (``_completions``). ``agreement``: the turn's words heard but not sent yet go out as deltas first; a
        turn none of whose words went out (its interim decodes dropped as loops) gets its final words as deltas."""
        stop = min(self.audio.end, item.end + int(self.config.lookahead_s * SAMPLING_RATE)) if lookahead else item.end
        limit = min(stop, item.next_start) if item.next_start is not None else stop
        heard = self._decode_and_diarize(item.buffer_start if self.last_speech > item.buffer_start else None, stop, final=True,
                                         window_s=LOOKAHEAD_WINDOW_S if lookahead else FINAL_WINDOW_S)
        events = self._deliver(item, agreement.update(heard) + agreement.flush()) if agreement is not None else []
        final = said_before([word for word in heard if word.text.strip()], limit / SAMPLING_RATE)
        if not item.text:
            events += self._deliver(item, final)
        self._finish(item, final, limit)
        self.unvoiced.append((item, stop))
        return events + self._completions(force=False)

    def _completions(self, force: bool) -> list[LiveEvent]:
        """The last segments and ``completed`` of the decoded turns, in order, each once the diarizer has found a
        voice for its words or ``VOICE_WAIT_S`` of timeline has passed its end; ``force``: now, whatever there is."""
        if force:
            self._diarizer_done(wait=True)
        events: list[LiveEvent] = []
        while self.unvoiced and self._diarizer_done(wait=False) and (force or self._may_label(self.unvoiced[0][1])):
            item, stop = self.unvoiced.popleft()
            events += self._segments(item, stop, final=True)
            events.append(TranscriptCompleted(item.id, joined_text(item.final), round((item.end - item.start) / SAMPLING_RATE, 3),
                                              item.start / SAMPLING_RATE, item.end / SAMPLING_RATE))
        return events

    def _may_label(self, stop: int) -> bool:
        """Whether a turn that stopped at ``stop`` can be labelled: the diarizer has found a voice, or ``VOICE_WAIT_S``
        of final timeline after the turn went by without one (or the session has no diarizer)."""
        return self.diarizer is None or bool(self.diarizer.turns) or self.diarizer.horizon >= stop / SAMPLING_RATE + VOICE_WAIT_S

    def _finish(self, item: _Item, heard: list[Chunk], end: int) -> None:
        """The turn's final words from ``item.buffer_start`` to ``end``: the final decode
        of that stretch (``heard``), which hears each word with all the audio around it; the deltas were
        decoded from growing prefixes of it ("The Icework" where the whole turn says "Nice work!"). A
        final decode that heard nothing keeps the deltas. The prompts after it are made of these words."""
        start = item.buffer_start / SAMPLING_RATE
        stop = end / SAMPLING_RATE + 1e-6

        def replaced(word: Chunk) -> bool:  # a delta of this stretch
            return word.start >= item.start / SAMPLING_RATE and start < word.end <= stop

        words = heard or [word for word in item.words if replaced(word)]
        self.context = deque(sorted([*(word for word in self.context if not replaced(word)), *words], key=lambda word: word.end),
                             maxlen=self.context.maxlen)
        item.final.extend(words)

    def _step(self) -> list[LiveEvent]:
        """Decode the open turn when enough new audio came; label what the timeline now covers."""
        item = self.item
        step = SHED_STEP_S if self.shedding else MIN_STEP_S
        due = item is not None and self.audio.end - item.last_decoded >= step * SAMPLING_RATE
        decoding = item is not None and due and self.last_speech > item.buffer_start
        heard = self._decode_and_diarize(item.buffer_start if decoding else None, self.audio.end, final=False,  # type: ignore[union-attr]
                                         prefix=self._sent_text(item) if decoding else "")
        if item is None:
            return []
        events: list[LiveEvent] = []
        if decoding:
            item.last_decoded = self.audio.end
            events += self._deliver(item, item.agreement.update(heard, self.audio.end / SAMPLING_RATE))
            events += self._cut(item)
        return events + self._completions(force=False) + self._segments(item, self.audio.end, final=False)

    def _decode_and_diarize(self, start: int | None, end: int, final: bool, window_s: float = FINAL_WINDOW_S,
                            prefix: str = "") -> list[Chunk]:
        """With the models held: Whisper's words for ``[start, end)`` (None: no decode), while the
        diarizer catches up to ``end`` beside it, on the other core (as file requests run them). A
        decode never waits for the diarizer: a step still running is left to finish and the next one
        starts after it. ``final``: the timeline up to ``end`` becomes final with the windows there
        are, and that is waited for (the turn's last segments need it); ``window_s``: a final decode's shortest encoder window;
        ``prefix``: the text sent from ``start`` on (``_decode``)."""
        with self.models.exclusive():
            if self.diarizer is not None:
                if final:
                    self._diarizer_done(wait=True)
                if self._diarizer_done(wait=False):
                    self._catching_up = self.models.beside.submit(self.diarizer.advance, self.audio.read, end, final)
            try:
                return self._decode(start, end, final, window_s, prefix) if start is not None else []
            finally:
                if final:
                    self._diarizer_done(wait=True)

    def _diarizer_done(self, wait: bool) -> bool:
        """Whether the diarizer has no step in flight (its error, if it had one, raised here); ``wait``
        for the one in flight first."""
        running = self._catching_up
        if running is None:
            return True
        if not wait and not running.done():
            return False
        self._catching_up = None
        running.result()
        return True

    def _decode(self, start: int, end: int, final: bool, window_s: float = FINAL_WINDOW_S, prefix: str = "") -> list[Chunk]:
        """Whisper's words for the session's samples ``[start, end)``, on the session's clock. The
        encoder reads the buffer and a margin, not 30 s (a final decode: at least ``window_s``), and the token budget is the buffer's
        (``asr.token_budget``): a looping decode stops within a second's worth of tokens. An interim
        hypothesis that loops is dropped (the next decode hears more); a final one is decoded again, once, and not
        sampled at the file path's fallback temperatures as well: each of those is a decode of Whisper's whole window
        (1-2 s on 2 cores), so a looping final decode costs at most two decodes instead of five. An interim decode
        continues the words sent from ``start`` on (``prefix``, SimulStreaming's forced decoding): they cannot change,
        and were most of its decoder steps (``pipeline/forced_prefix.py``)."""
        samples = self.audio.read(start, end)
        if len(samples) < WINDOW:
            return []
        seconds = len(samples) / SAMPLING_RATE
        config = InferenceConfig(language=self.language, return_timestamps="word", batch_size=1, assisted=False, prompt=self._prompt(start),
                                 chunk_length_s=min(max(math.ceil(seconds), 1), BUDGETED_S))
        transcript = self.models.recognizer.transcribe(  # the caller holds the models (_decode_and_diarize)
            samples, config, seconds, pieces=[Piece(spans=((0, len(samples)),))], should_stop=self.should_stop,
            shortest_window_s=window_s if final else SHORTEST_S, retry_loops=final, prefix=prefix, fallback_temperatures=(),
        )
        self.language = self.language or transcript.language
        offset = start / SAMPLING_RATE
        return [Chunk(word.text, word.start + offset, word.end + offset) for word in transcript.chunks]

    @staticmethod
    def _sent_from_buffer(item: _Item) -> list[Chunk]:
        """The words sent from the open turn's buffer (a cut starts it at the sample where a word ends: not that one)."""
        return [word for word in item.words if int(word.end * SAMPLING_RATE) > item.buffer_start]

    def _sent_text(self, item: _Item) -> str:
        """The words sent from the open turn's buffer, as Whisper wrote them."""
        return "".join(word.text for word in self._sent_from_buffer(item))

    def _prompt(self, start: int) -> str | None:
        """The client's prompt, then the last final words heard before ``start``."""
        before = [word.text for word in self.context if word.end <= start / SAMPLING_RATE]
        recent = "".join(before).strip()[-PROMPT_CHARS:]
        prompt = " ".join(part for part in (self.config.prompt, recent) if part)
        return prompt or None

    def _deliver(self, item: _Item, words: list[Chunk]) -> list[LiveEvent]:
        text = "".join(word.text for word in words)
        if not item.text:
            text = text.lstrip()
        if not text:
            return []
        item.words.extend(words)
        item.text += text
        self.context.extend(words)
        return [TranscriptDelta(item.id, text, tuple(word.end for word in words))]

    def _cut(self, item: _Item) -> list[LiveEvent]:
        """Cut the decoded buffer where its words can be final (``cuts.cut_point``: a sentence end, a
        speaker change the final timeline sees, a buffer grown too long); the stretch cut off is decoded
        once more, whole, for its final words."""
        events: list[LiveEvent] = []
        inside = self._sent_from_buffer(item)
        seconds = cut_point(inside, self._timeline_speakers(inside), item.buffer_start / SAMPLING_RATE, self.audio.end / SAMPLING_RATE,
                            self.diarizer.horizon if self.diarizer is not None else 0.0)
        if seconds is None and self.audio.end - item.buffer_start > MAX_BUFFER_S * SAMPLING_RATE:
            words = item.agreement.flush()  # nothing final in a whole window: what the last decode heard is final
            events += self._deliver(item, words)
            seconds = words[-1].end if words else self.audio.end / SAMPLING_RATE
        if seconds is None:
            return []
        cut_at = max(item.buffer_start, int(seconds * SAMPLING_RATE))
        if cut_at > item.buffer_start:  # the stretch cut off is decoded once more, whole, with what follows it: its final words
            with self.models.exclusive():
                heard = self._decode(item.buffer_start, min(self.audio.end, cut_at + int(CUT_CONTEXT_S * SAMPLING_RATE)), final=True)
            self._finish(item, said_before([word for word in heard if word.text.strip()], cut_at / SAMPLING_RATE), cut_at)
            item.closed = len(item.final)
        item.buffer_start = cut_at
        return events

    def _timeline_speakers(self, words: list[Chunk]) -> list[str] | None:
        """Each word's speaker on the diarizer's final timeline, for the words it covers ("" for the rest;
        None without a timeline, or while the diarizer's step runs)."""
        if self.diarizer is None or not self._diarizer_done(wait=False):
            return None
        covered = [word for word in words if word.end <= self.diarizer.horizon]
        if not covered:
            return None
        speakers = word_speakers(covered, self._turns_near(covered))
        return speakers + [""] * (len(words) - len(covered))

    def _turns_near(self, words: list[Chunk]) -> list[Turn]:
        """The final turns around ``words``; where none reach them (Whisper heard words the diarizer found
        no voice in), every turn kept, so the words go to the nearest speaker as on the file path, not to none."""
        assert self.diarizer is not None
        return self.diarizer.turns_between(words[0].start - 1.0, words[-1].end + 1.0) or self.diarizer.turns

    def _segments(self, item: _Item, end: int, final: bool) -> list[LiveEvent]:
        """Sentence-sized runs of final words with their speaker, for the words the speaker
        timeline is final over; the last run waits for more words unless the turn is over."""
        if self.diarizer is None or not self._diarizer_done(wait=False):  # its timeline is read only between its steps
            return []
        unsent = item.final[item.sent :]
        covered = len(unsent) if final else next((n for n, word in enumerate(unsent) if word.end > self.diarizer.horizon), len(unsent))
        closed, turn_over = item.closed - item.sent, final
        if not final and 0 < closed <= covered:  # the words up to a cut that closed a segment: all of them
            final, covered = True, closed
        ready = unsent[:covered]
        if not ready:
            return []
        before = item.final[max(item.sent - LABEL_CONTEXT_WORDS, 0) : item.sent]  # sent already: their sentence's context
        labelled = [*before, *ready]
        turns = self._turns_near(labelled)
        if not turns and not turn_over:  # no voice found yet (a session's first seconds): wait for one rather than say UNKNOWN
            return []
        speakers = word_speakers(labelled, turns)[len(before) :]
        ranges = segment_ranges(ready, speakers)
        if not final:
            ranges = ranges[:-1]
        events: list[LiveEvent] = []
        for span in ranges:
            words = ready[span.start : span.stop]
            self.segments += 1
            events.append(TranscriptSegment(item.id, f"seg_{self.segments:04d}", self.labels(speakers[span.start]), words[0].start,
                                            words[-1].end, joined_text(words), tuple(words)))
            item.sent += len(words)
        self.diarizer.forget_before(ready[0].start - 5.0)
        return events

    def _drop_old_audio(self) -> None:
        keep = self.audio.end - int(KEEP_BEFORE_S * SAMPLING_RATE)
        for item in (self.item, *self.settling):
            if item is not None:
                keep = min(keep, item.buffer_start)
        if self.diarizer is not None:
            keep = min(keep, self.diarizer.oldest_needed)
        self.audio.drop_before(keep)
