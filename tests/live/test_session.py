"""A live session on tiny random models: turns, final words, segments and their order."""

from __future__ import annotations

import numpy as np
import pytest

from speaker_transcripts.errors import InvalidRequestError, RequestAbandoned
from speaker_transcripts.live import cuts
from speaker_transcripts.live import session as live
from speaker_transcripts.live.events import (
    Cleared,
    Committed,
    SpeechStarted,
    SpeechStopped,
    TranscriptCompleted,
    TranscriptDelta,
    TranscriptSegment,
)
from speaker_transcripts.live.session import LOOKAHEAD_S, LiveConfig, LiveSession, said_before
from speaker_transcripts.pipeline.audio import as_float32, decode_file
from speaker_transcripts.pipeline.transcript import Chunk

RATE = 16000


@pytest.fixture(scope="module")
def conversation(speech_wav) -> np.ndarray:
    """The speech clip twice, 1.5 s of quiet between and after: two turns."""
    speech = as_float32(decode_file(speech_wav).samples)
    quiet = np.zeros(int(1.5 * RATE), dtype=np.float32)
    return np.concatenate([quiet[:RATE // 2], speech, quiet, speech, quiet])


def stream(session: LiveSession, samples: np.ndarray, piece_s: float = 0.1) -> list:
    size = int(piece_s * RATE)
    return [event for start in range(0, len(samples), size) for event in session.append(samples[start : start + size])]


def by_item(events: list) -> dict[str, list]:
    items: dict[str, list] = {}
    for event in events:
        if hasattr(event, "item_id"):
            items.setdefault(event.item_id, []).append(event)
    return items


def test_each_turn_starts_stops_and_completes_with_its_deltas_and_segments_in_order(live_handler, conversation):
    """With a lookahead, a stopped turn's final text comes once ``LOOKAHEAD_S`` of audio after it was heard
    (the last turn's with the quiet that follows it: no commit, no close)."""
    session = LiveSession(live_handler, LiveConfig(language="en", lookahead_s=LOOKAHEAD_S))
    events = stream(session, conversation)
    assert sum(isinstance(event, TranscriptCompleted) for event in events) == 1  # the second turn's lookahead is not heard yet
    events += stream(session, np.zeros(int(LOOKAHEAD_S * RATE), dtype=np.float32))
    items = by_item(events)
    assert len(items) == 2
    for item_events in items.values():
        kinds = [type(event) for event in item_events]
        assert kinds[0] is SpeechStarted and kinds[-1] is TranscriptCompleted
        assert kinds.index(SpeechStopped) < kinds.index(Committed) < kinds.index(TranscriptCompleted)
        completed = item_events[-1]
        assert all(event.delta.strip() for event in item_events if isinstance(event, TranscriptDelta))
        segments = [event for event in item_events if isinstance(event, TranscriptSegment)]
        assert "".join(segment.text for segment in segments).replace(" ", "") == completed.transcript.replace(" ", "")
        assert all(segment.speaker for segment in segments) and [s.start for s in segments] == sorted(s.start for s in segments)
        started, stopped = item_events[0], next(event for event in item_events if isinstance(event, SpeechStopped))
        assert 0 <= started.audio_start_ms < stopped.audio_end_ms <= len(conversation) * 1000 // RATE


def test_a_lookahead_decode_keeps_the_words_whose_middle_is_before_the_next_turn():
    """A seam as cross-attention times it (conv01's 4th): the turn's last word runs past the next turn's start
    (3.0 s), the next turn's first word starts before it; each goes to its own turn by its middle."""
    words = [Chunk(" migration.", 1.59, 2.91), Chunk(" How", 2.91, 3.45), Chunk(" far", 3.45, 3.67)]
    assert [word.text for word in said_before(words, 3.0)] == [" migration."]
    assert said_before([Chunk(" that?", 2.28, 3.14)], 3.0) == [Chunk(" that?", 2.28, 3.14)]


def test_a_final_decode_hears_a_longer_window_than_an_interim_one(live_handler, conversation, monkeypatch):
    """Interim decodes: the encoder's window sized to the buffer (at least ``SHORTEST_S``); final decodes: at
    least ``FINAL_WINDOW_S``, which Whisper hears short turns better in. A final decode that loops is decoded
    again once, never sampled at the fallback temperatures (each a decode of the whole window)."""
    from speaker_transcripts.models.encoder_window import SHORTEST_S

    recognizer = live_handler.recognizer
    windows: list[tuple[bool, float]] = []

    def transcribe(*args, shortest_window_s, retry_loops, **kwargs):
        assert kwargs["fallback_temperatures"] == ()
        windows.append((retry_loops, shortest_window_s))
        return type(recognizer).transcribe(recognizer, *args, shortest_window_s=shortest_window_s, retry_loops=retry_loops, **kwargs)

    monkeypatch.setattr(recognizer, "transcribe", transcribe)
    session = LiveSession(live_handler, LiveConfig(language="en", diarize=False))
    completed = [event for event in stream(session, conversation) + session.close() if isinstance(event, TranscriptCompleted)]
    assert len(completed) == 2 and live.FINAL_WINDOW_S > SHORTEST_S
    assert sorted(set(windows)) == [(False, SHORTEST_S), (True, live.FINAL_WINDOW_S)]
    assert sum(final for final, _ in windows) == 2  # one final decode a turn


@pytest.mark.parametrize("alone", [True, False])
def test_a_final_decode_that_hears_what_follows_reads_the_whole_window_while_the_session_is_alone(live_handler, conversation, monkeypatch, alone):
    """With a lookahead, a session alone on the models decodes each stopped turn and what follows it in
    Whisper's whole window (``LOOKAHEAD_WINDOW_S``); beside another session, at its end in ``FINAL_WINDOW_S``."""
    recognizer = live_handler.recognizer
    windows: list[float] = []

    def transcribe(*args, shortest_window_s, retry_loops, **kwargs):
        if retry_loops:
            windows.append(shortest_window_s)
        return type(recognizer).transcribe(recognizer, *args, shortest_window_s=shortest_window_s, retry_loops=retry_loops, **kwargs)

    monkeypatch.setattr(recognizer, "transcribe", transcribe)
    session = LiveSession(live_handler, LiveConfig(language="en", diarize=False, lookahead_s=LOOKAHEAD_S))
    session.alone = alone
    stream(session, np.concatenate([conversation, np.zeros(int(LOOKAHEAD_S * RATE), dtype=np.float32)]))
    assert windows == [live.LOOKAHEAD_WINDOW_S if alone else live.FINAL_WINDOW_S] * 2


def marked_decodes(monkeypatch, prefixes: list | None = None) -> list[list]:
    """Whisper stood in for by a word every 0.3 s of the buffer (a sentence every ten): the same words in every
    interim decode (so they agree), ``finalN`` in a final decode; the words of the final decodes, in order.
    ``prefixes``: each decode's (final, prefix given, the text of the words sent so far that start in the audio it hears)."""
    from speaker_transcripts.pipeline.transcript import Chunk

    finals: list[list[Chunk]] = []

    def decode(self, start, end, final, window_s=live.FINAL_WINDOW_S, prefix=""):
        kind = "final" if final else "interim"
        times = np.arange(start / RATE, end / RATE - 0.25, 0.3)
        words = [Chunk(f" {kind}{index}{'.' if index % 10 == 9 else ''}", at, at + 0.25) for index, at in enumerate(times)]
        if final:
            finals.append(words)
        if prefixes is not None:
            sent = self.item.words if self.item is not None else []
            prefixes.append((final, prefix, "".join(word.text for word in sent if word.start >= start / RATE)))
        return words

    monkeypatch.setattr(LiveSession, "_decode", decode)
    return finals


def test_an_interim_decode_continues_the_words_sent_from_its_buffer(live_handler, speech_wav, monkeypatch):
    """Each interim decode is given the words already sent from the audio it hears (Whisper goes on from them:
    ``pipeline/forced_prefix.py``); a final decode none."""
    decodes: list[tuple[bool, str, str]] = []
    marked_decodes(monkeypatch, decodes)
    speech = as_float32(decode_file(speech_wav).samples)
    session = LiveSession(live_handler, LiveConfig(language="en", turn_detection=None))
    events = stream(session, np.tile(speech, int(np.ceil(20 * RATE / len(speech))))) + session.commit()
    interim = [(prefix, sent) for final, prefix, sent in decodes if not final]
    assert all(prefix == sent for prefix, sent in interim)
    assert sum(bool(prefix) for prefix, _ in interim) > len(interim) / 2
    assert not any(prefix for final, prefix, _ in decodes if final)
    deltas = "".join(event.delta for event in events if isinstance(event, TranscriptDelta))
    assert all(prefix.strip() in deltas for prefix, _ in interim)


def test_a_long_turns_stretches_cut_off_the_buffer_are_each_decoded_whole_for_their_final_text(live_handler, speech_wav, monkeypatch):
    """A turn of 40 s (one commit at its end): each stretch cut off the decoded buffer is decoded once more,
    whole, with up to ``CUT_CONTEXT_S`` of what follows it, and the turn's final text is those decodes' words
    before each cut and the last decode, in order."""
    finals = marked_decodes(monkeypatch)
    speech = as_float32(decode_file(speech_wav).samples)
    session = LiveSession(live_handler, LiveConfig(language="en", turn_detection=None))
    events = stream(session, np.tile(speech, int(np.ceil(40 * RATE / len(speech))))) + session.commit()
    completed = [event for event in events if isinstance(event, TranscriptCompleted)]
    assert len(completed) == 1 and len(finals) >= 3  # two cuts at least, and the turn's end
    kept, position = completed[0].transcript.split(), 0
    for words in finals:  # each final decode gives the turn a run of its first words (those before its cut)
        count = 0
        while count < len(words) and position + count < len(kept) and kept[position + count] == words[count].text.strip():
            count += 1
        assert count > 0
        position += count
    assert position == len(kept)
    assert " ".join(event.text for event in events if isinstance(event, TranscriptSegment)) == completed[0].transcript
    assert "interim" in "".join(event.delta for event in events if isinstance(event, TranscriptDelta))


def test_a_turns_final_text_is_its_whole_decode_with_what_follows_not_its_deltas(live_handler, conversation, monkeypatch):
    """Deltas come from decodes of a turn's growing prefix; its final text (its segments, ``completed``, the
    next turn's prompt) is the decode of the whole turn and ``LOOKAHEAD_S`` of the audio after it, which hears
    every word with what follows: the words that start before the next turn (the last turn's: the session's end)."""
    from speaker_transcripts.pipeline.transcript import joined_text

    finals = marked_decodes(monkeypatch)
    session = LiveSession(live_handler, LiveConfig(language="en", lookahead_s=LOOKAHEAD_S))
    events = stream(session, conversation)
    end = session.audio.end / RATE
    items = list(by_item(events + session.close()).values())
    assert len(items) == len(finals) == 2 and all(finals)
    next_starts = [items[1][0].audio_start_ms / 1000, end]
    for item_events, words, next_start in zip(items, finals, next_starts, strict=True):
        stopped = next(event for event in item_events if isinstance(event, SpeechStopped)).audio_end_ms / 1000
        assert words[-1].end > min(stopped + LOOKAHEAD_S, end) - 0.6  # the decode heard what followed the turn
        final = joined_text([word for word in words if (word.start + word.end) / 2 < next_start])  # said_before
        deltas = [event.delta for event in item_events if isinstance(event, TranscriptDelta)]
        assert deltas and deltas[0].startswith("interim0")  # interim words went out while the turn was spoken
        assert item_events[-1].transcript == final
        assert " ".join(event.text for event in item_events if isinstance(event, TranscriptSegment)) == final
    assert session._prompt(session.audio.end).endswith(final[-60:])  # the next turn hears the final words, not the deltas


@pytest.mark.parametrize("lookahead_s, shedding, alone", [(0.0, False, True), (LOOKAHEAD_S, True, True), (LOOKAHEAD_S, False, False)],
                         ids=["no-lookahead", "behind", "not-alone"])
def test_without_lookahead_a_turns_final_text_comes_when_it_stops(live_handler, conversation, monkeypatch, lookahead_s, shedding, alone):
    """``lookahead_s=0``, or a session behind (``shedding``) or not ``alone`` on the models whatever its
    lookahead: each turn's final decode ends where the turn stopped, and its ``completed`` comes with its stop,
    no audio after it needed, even when the audio after the stop came in the same append (2-s appends, as a
    session behind takes them) and holds the next turn's first words."""
    finals = marked_decodes(monkeypatch)
    session = LiveSession(live_handler, LiveConfig(language="en", lookahead_s=lookahead_s))
    session.shedding, session.alone = shedding, alone
    events = stream(session, conversation, piece_s=2.0)
    stops = [event.audio_end_ms / 1000 for event in events if isinstance(event, SpeechStopped)]
    assert sum(isinstance(event, TranscriptCompleted) for event in events) == len(stops) == len(finals) == 2
    assert all(stop - 0.6 < words[-1].end <= stop for words, stop in zip(finals, stops, strict=True))


def test_the_turns_do_not_depend_on_how_the_audio_was_cut(live_handler, conversation):
    def turns(piece_s: float) -> list[tuple[int, int]]:
        events = stream(LiveSession(live_handler, LiveConfig(language="en")), conversation, piece_s)
        starts = [event.audio_start_ms for event in events if isinstance(event, SpeechStarted)]
        stops = [event.audio_end_ms for event in events if isinstance(event, SpeechStopped)]
        return list(zip(starts, stops, strict=True))

    assert turns(0.1) == turns(0.37) == turns(2.0)


def test_without_turn_detection_the_client_commits_each_turn(live_handler, conversation):
    session = LiveSession(live_handler, LiveConfig(language="en", turn_detection=None))
    with pytest.raises(InvalidRequestError, match="nothing to commit"):
        session.commit()
    events = stream(session, conversation[: 4 * RATE])
    assert not any(isinstance(event, (SpeechStarted, SpeechStopped, TranscriptCompleted)) for event in events)
    committed = session.commit()
    assert isinstance(committed[0], Committed) and isinstance(committed[-1], TranscriptCompleted)
    with pytest.raises(InvalidRequestError):
        session.commit()  # nothing since the last commit


def test_a_cleared_turn_is_dropped_and_the_session_goes_on(live_handler, conversation):
    session = LiveSession(live_handler, LiveConfig(language="en"))
    first = stream(session, conversation[: int(2.0 * RATE)])
    assert any(isinstance(event, SpeechStarted) for event in first)
    assert session.clear() == [Cleared()]
    rest = stream(session, conversation[int(2.0 * RATE):])
    cleared_item = next(event.item_id for event in first if isinstance(event, SpeechStarted))
    assert not any(isinstance(event, TranscriptCompleted) and event.item_id == cleared_item for event in rest)
    assert any(isinstance(event, TranscriptCompleted) for event in rest)


def test_a_long_turn_is_decoded_in_a_bounded_buffer_and_its_audio_is_not_kept(live_handler, speech_wav, monkeypatch):
    """A 36-s turn that nothing ends (the client commits turns itself), past Whisper's 29-s buffer: no decode
    hears more than Whisper's window, and the session keeps a bounded stretch of audio, not the turn. (In
    2-s appends: the tiny random model decodes every buffer to its token budget, and this test was the
    suite's slowest, 8 min beside four busy processes, with a 60-s turn in 1-s appends.)"""
    speech = as_float32(decode_file(speech_wav).samples)
    monologue = np.concatenate([speech] * 13)
    heard: list[float] = []
    decode = LiveSession._decode

    def spy(self, start, end, final, *window_s):
        heard.append((end - start) / RATE)
        return decode(self, start, end, final, *window_s)

    monkeypatch.setattr(LiveSession, "_decode", spy)
    monkeypatch.setattr(cuts, "RUN_ON_S", 5.0)  # tiny random Whisper ends few sentences: cut early to see the rule
    session = LiveSession(live_handler, LiveConfig(language="en", diarize=False, turn_detection=None))
    kept = []
    for start in range(0, len(monologue), 2 * RATE):
        session.append(monologue[start : start + 2 * RATE])
        kept.append((session.audio.end - session.audio.start) / RATE)
    assert len(monologue) / RATE > live.MAX_BUFFER_S + 5 and session.item is not None and max(heard) <= live.MAX_BUFFER_S + 1.0
    assert max(kept) <= live.MAX_BUFFER_S + live.KEEP_BEFORE_S + 1.0


def test_a_session_told_to_stop_stops_within_a_decode(live_handler, conversation):
    stop = [False]
    session = LiveSession(live_handler, LiveConfig(language="en"), should_stop=lambda: stop[0])
    stream(session, conversation[: RATE])
    stop[0] = True
    with pytest.raises(RequestAbandoned):
        stream(session, conversation[RATE:])


def test_a_decode_never_waits_for_the_diarizer_and_the_turn_end_does(live_handler, conversation, monkeypatch):
    """The diarizer's step is held: the session goes on decoding and sends words (no segments: the
    timeline is read only between its steps); once released, the turn's end waits for it and every
    final word gets its segment."""
    import threading

    from speaker_transcripts.live import speakers

    release, holding = threading.Event(), threading.Event()
    real_advance = speakers.LiveDiarizer.advance

    def held_advance(self, read, available, final=False):
        if not release.is_set():
            holding.set()
            release.wait(120)  # a failure guard only
        return real_advance(self, read, available, final)

    monkeypatch.setattr(speakers.LiveDiarizer, "advance", held_advance)
    live_handler.beside.submit(lambda: None).result()  # a step an earlier test's session left in flight is done
    decodes: list[bool] = []
    real_decode = LiveSession._decode

    def counted(self, start, end, final, *window_s):
        decodes.append(release.is_set())
        return real_decode(self, start, end, final, *window_s)

    monkeypatch.setattr(LiveSession, "_decode", counted)
    session = LiveSession(live_handler, LiveConfig(language="en"))
    speech_s = (len(conversation) / RATE - 3.5) / 2  # the fixture: 0.5 s quiet, speech, 1.5 s, speech, 1.5 s
    first_turn = conversation[: int((0.5 + 0.9 * speech_s) * RATE)]  # inside the first turn: nothing ends it yet
    while_held = stream(session, first_turn)
    assert holding.is_set() and not release.is_set()
    assert decodes.count(False) >= 3  # Whisper went on while the diarizer's first step was held
    assert not any(isinstance(event, TranscriptSegment) for event in while_held)
    release.set()
    after = stream(session, conversation[len(first_turn):]) + session.close()
    words = sum(len(event.ends) for event in while_held + after if isinstance(event, TranscriptDelta))
    segmented = sum(len(event.text.split()) for event in while_held + after if isinstance(event, TranscriptSegment))
    assert words > 0 and segmented > 0


def test_a_session_behind_sheds_interim_decodes_and_keeps_every_turn_whole(live_handler, conversation, monkeypatch):
    """``shedding`` (set by the server while the session is behind): a decode every ``SHED_STEP_S`` of new
    audio instead of every ``MIN_STEP_S``, and still each turn complete, with its deltas and its final text."""
    finals: dict[bool, list[bool]] = {}
    real_decode = LiveSession._decode

    for shedding in (False, True):
        decodes: list[bool] = []

        def counted(self, start, end, final, *window_s, decodes=decodes):
            decodes.append(final)
            return real_decode(self, start, end, final, *window_s)

        monkeypatch.setattr(LiveSession, "_decode", counted)
        session = LiveSession(live_handler, LiveConfig(language="en", diarize=False))
        session.shedding = shedding
        items = by_item(stream(session, conversation) + session.close())
        assert len(items) == 2
        for item_events in items.values():
            assert isinstance(item_events[-1], TranscriptCompleted) and item_events[-1].transcript
            assert any(isinstance(event, TranscriptDelta) for event in item_events)
        finals[shedding] = decodes
    assert finals[True].count(True) == finals[False].count(True) == 2, "each turn's final decode is kept"
    assert 0 < finals[True].count(False) < finals[False].count(False) / 2, "interim decodes shed"


def voice_found_at(monkeypatch, seconds: float | None) -> None:
    """The live diarizer stood in for: its timeline final 2 s behind the audio (all of it at a turn's end), one
    voice, ``SPEAKER_00``, over all of it once the audio reaches ``seconds`` (None: never)."""
    from speaker_transcripts.live import speakers
    from speaker_transcripts.pipeline.diarization import Turn

    def advance(self, read, available, final=False):
        self.horizon = max(self.horizon, available / RATE - (0.0 if final else 2.0))
        if seconds is not None and available / RATE >= seconds and not self.turns:
            self.turns.append(Turn("SPEAKER_00", 0.0, 1e6))
        return []

    monkeypatch.setattr(speakers.LiveDiarizer, "advance", advance)


def first_turn_end_s(conversation: np.ndarray) -> float:
    return 0.5 + (len(conversation) / RATE - 3.5) / 2  # the fixture: 0.5 s quiet, speech, 1.5 s, speech, 1.5 s


def stream_timed(session: LiveSession, samples: np.ndarray, piece_s: float = 0.1) -> list[tuple[float, object]]:
    """``stream`` with the diarizer's step awaited after each piece, each event with the session's audio so far (s)."""
    size, timed = int(piece_s * RATE), []
    for start in range(0, len(samples), size):
        for event in session.append(samples[start : start + size]):
            timed.append((session.audio.end / RATE, event))
        session._diarizer_done(wait=True)
    return timed


def test_a_turn_that_ends_before_any_voice_is_found_waits_for_the_first_one(live_handler, conversation, monkeypatch):
    """The session's first turn stops before the diarizer has founded a speaker: its segments and ``completed``
    wait (no ``UNKNOWN``) and come, in that order, labelled with the first voice, as soon as there is one."""
    marked_decodes(monkeypatch)
    voice_at = first_turn_end_s(conversation) + 1.0
    voice_found_at(monkeypatch, voice_at)
    live_handler.beside.submit(lambda: None).result()  # a step an earlier test's session left in flight is done
    session = LiveSession(live_handler, LiveConfig(language="en"))
    timed = stream_timed(session, conversation) + [(len(conversation) / RATE, event) for event in session.close()]
    first = next(event.item_id for _, event in timed if isinstance(event, SpeechStopped))
    stopped = next(at for at, event in timed if isinstance(event, SpeechStopped))
    mine = [(at, event) for at, event in timed if getattr(event, "item_id", None) == first]
    segments = [at for at, event in mine if isinstance(event, TranscriptSegment)]
    assert segments and isinstance(mine[-1][1], TranscriptCompleted)
    assert stopped < voice_at <= min(segments)
    assert {event.speaker for _, event in timed if isinstance(event, TranscriptSegment)} == {"SPEAKER_00"}
    assert sum(isinstance(event, TranscriptCompleted) for _, event in timed) == 2


@pytest.mark.parametrize("ended_by", ["the wait", "a commit", "the session's end"])
def test_a_turn_waits_for_a_voice_only_so_long(live_handler, conversation, monkeypatch, ended_by):
    """Where the diarizer never finds a voice, a stopped turn's words go out as ``UNKNOWN`` once ``VOICE_WAIT_S``
    of timeline has passed its end; a client's commit or the session's end completes it at once."""
    marked_decodes(monkeypatch)
    voice_found_at(monkeypatch, None)
    live_handler.beside.submit(lambda: None).result()
    session = LiveSession(live_handler, LiveConfig(language="en", turn_detection=None if ended_by == "a commit" else live.TurnDetection()))
    timed = stream_timed(session, conversation[: int((first_turn_end_s(conversation) + 0.7) * RATE)])
    if ended_by == "a commit":
        timed += [(session.audio.end / RATE, event) for event in session.commit()]
    elif ended_by == "the session's end":
        timed += [(session.audio.end / RATE, event) for event in session.close()]
    else:
        stopped = next(event.audio_end_ms / 1000 for _, event in timed if isinstance(event, SpeechStopped))
        timed += stream_timed(session, np.zeros(int((live.VOICE_WAIT_S + 4) * RATE), dtype=np.float32))
        completed = next(at for at, event in timed if isinstance(event, TranscriptCompleted))
        assert stopped + live.VOICE_WAIT_S + 2.0 <= completed <= stopped + live.VOICE_WAIT_S + 2.3  # the timeline: 2 s behind
    assert sum(isinstance(event, TranscriptCompleted) for _, event in timed) == 1
    segments = [event for _, event in timed if isinstance(event, TranscriptSegment)]
    assert segments and {segment.speaker for segment in segments} == {"UNKNOWN"}
