"""Follow a conversation live: who says what, printed as it becomes final.

    speaker-transcripts live meeting.wav                       # the file played at real-time pace, here
    speaker-transcripts live meeting.wav --speed 4 --out meeting.srt
    speaker-transcripts live --mic                             # the default microphone (ALSA), until Ctrl-C
    speaker-transcripts live meeting.wav --url http://host:8000 --api-key KEY

In-process (no ``--url``) the session runs on models loaded here (the same settings and options as
``transcribe``); with ``--url`` it is a client of a server's live route (``GET /v1/realtime``,
OpenAI's Realtime transcription protocol). Each line is one speaker's sentence (``SPEAKER_00:
...``, or a known speaker's name) once its words and speaker are final; without diarization, each
turn's text. ``--out`` saves the session's transcript when it ends (txt, srt, vtt or json, by the
file's extension), Ctrl-C included.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from speaker_transcripts.cli import described
from speaker_transcripts.cli.options import add_known_speaker_options, known_speakers_parameter
from speaker_transcripts.live.events import Backlog, LiveEvent, TranscriptDelta, TranscriptFailed
from speaker_transcripts.live.transcript import LiveTranscript
from speaker_transcripts.output.formats import render
from speaker_transcripts.pipeline.audio import SAMPLING_RATE

PIECE_S = 0.1  # audio is sent 100 ms at a time, as a microphone would deliver it
SAVED_FORMATS = {".txt": "txt", ".srt": "srt", ".vtt": "vtt", ".json": "json"}
FINAL_COMMIT = "live-cli-final-commit"  # the event_id of the commit sent after the last audio


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="speaker-transcripts live", description=described(__doc__))
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", type=Path, help="an audio file, played as if it were being spoken")
    source.add_argument("--mic", nargs="?", const="default", metavar="DEVICE", help="record from a microphone (ALSA device; default: default)")
    parser.add_argument("--speed", type=float, default=1.0, help="play the file this many times faster than real time (default: 1)")
    parser.add_argument("--url", help="a server's base URL (http://host:8000): run the session there instead of here")
    parser.add_argument("--api-key", "--token", dest="api_key", default=os.environ.get("API_KEY"),
                        help="the server's API_KEY (default: $API_KEY)")
    parser.add_argument("--ca-cert", type=Path, help="trust a wss:// server whose certificate this CA (PEM) signed; as SSL_CERT_FILE does")
    parser.add_argument("--out", type=Path, help="save the transcript here when the session ends (.txt, .srt, .vtt or .json)")
    parser.add_argument("--language", help="language code or name; detected when omitted")
    parser.add_argument("--prompt", help="text that came before: names, spellings, style")
    parser.add_argument("--no-diarize", dest="diarize", action="store_false", help="no speakers, text only")
    add_known_speaker_options(parser)
    parser.add_argument("--asr-model", help="overrides ASR_MODEL (in-process only)")
    parser.add_argument("--diarization-model", help="overrides DIARIZATION_MODEL (in-process only)")
    arguments = parser.parse_args(argv)
    if arguments.speed <= 0 or arguments.speed > 1000:
        parser.error("--speed is a factor over real time, above 0 and at most 1000")
    if arguments.out is not None and arguments.out.suffix.lower() not in SAVED_FORMATS:
        parser.error(f"--out {arguments.out}: name a .txt, .srt, .vtt or .json file")
    if arguments.file is not None and not arguments.file.is_file():
        parser.error(f"{arguments.file}: no such file")
    if arguments.ca_cert is not None and not arguments.ca_cert.is_file():
        parser.error(f"--ca-cert {arguments.ca_cert}: no such file")
    if arguments.url is not None and (arguments.asr_model or arguments.diarization_model):
        parser.error("--asr-model and --diarization-model choose the models of an in-process session; a server has its own")
    return arguments


def file_pieces(path: Path, speed: float) -> Iterator[np.ndarray]:
    """The file's 16-kHz samples as they would arrive if spoken now (``speed`` times faster): each
    call hands over whatever has "arrived" since the last, so a slow consumer gets larger pieces."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    samples = as_float32(decode_file(path.read_bytes()).samples)  # as a microphone's come
    started, sent = time.monotonic(), 0
    while sent < len(samples):
        due = min(len(samples), max(int((time.monotonic() - started) * speed * SAMPLING_RATE), sent + int(PIECE_S * SAMPLING_RATE)))
        wait = started + due / SAMPLING_RATE / speed - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        yield samples[sent:due]
        sent = due


def open_microphone(device: str) -> Any:
    """An ALSA capture device, opened now (before any model loads), or one line saying why not;
    alsa-lib's own complaints on stderr are kept back, the reason is in the line."""
    import av

    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as quiet:
            os.dup2(quiet.fileno(), 2)
            return av.open(device, format="alsa", options={"sample_rate": str(SAMPLING_RATE), "channels": "1"})
    except (av.error.FFmpegError, OSError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise SystemExit(f"speaker-transcripts live: cannot open the microphone {device!r} ({reason}); "
                         "is there a sound card? (arecord -l lists them)") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def microphone_pieces(container: Any) -> Iterator[np.ndarray]:
    """16-kHz samples from an open capture device, as they come, until Ctrl-C."""
    import av

    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLING_RATE)
    with container:
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                yield out.to_ndarray().reshape(-1)


def in_process(arguments: argparse.Namespace, pieces: Iterator[np.ndarray], show: Callable[[LiveEvent], None]) -> None:
    """The session on models loaded here."""
    from speaker_transcripts.cli.options import model_settings
    from speaker_transcripts.config import parse_parameters, resolve_request
    from speaker_transcripts.live.capacity import live_capacity
    from speaker_transcripts.live.session import LiveConfig, LiveSession
    from speaker_transcripts.pipeline.transcriber import Transcriber

    arguments.assistant, arguments.assistant_model = False, None
    arguments.diarize = None if arguments.diarize else False
    handler = Transcriber(settings=model_settings(arguments))
    parameters = {"language": arguments.language, "prompt": arguments.prompt, "known_speakers": known_speakers_parameter(arguments)}
    config = resolve_request(parse_parameters({k: v for k, v in parameters.items() if v is not None})[0], handler.capabilities).config
    voices = {**handler.library, **(handler.voice_embeddings(config.known_speakers) if config.known_speakers else {})}
    session = LiveSession(handler, LiveConfig(language=config.language, prompt=config.prompt, diarize=bool(config.diarize),
                                              known_speakers=voices, lookahead_s=live_capacity(handler.capabilities.fast_encoder).lookahead_s))
    print("live: listening (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        for samples in pieces:
            for event in session.append(samples):
                show(event)
    finally:
        for event in session.close():
            show(event)


async def remote(arguments: argparse.Namespace, pieces: Iterator[np.ndarray], show: Callable[[LiveEvent], None]) -> None:
    """The session on a server's live route: audio sent as it comes, events shown as they arrive."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    from speaker_transcripts.server.realtime_protocol import EventReader

    url = realtime_url(arguments.url)
    headers = {"Authorization": f"Bearer {arguments.api_key}"} if arguments.api_key else {}
    transcription: dict[str, Any] = {"language": arguments.language, "prompt": arguments.prompt, "diarize": arguments.diarize}
    if known := known_speakers_parameter(arguments):
        transcription["known_speakers"] = known
    update = {"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": SAMPLING_RATE}, "transcription": {k: v for k, v in transcription.items() if v is not None}}}}}
    read = EventReader()
    stop = _first_interrupt_finishes()
    connected = False
    trust = {"ssl": ssl.create_default_context(cafile=arguments.ca_cert)} if arguments.ca_cert and url.startswith("wss://") else {}
    try:
        async with connect(url, additional_headers=headers, max_size=None, **trust) as socket:
            connected = True
            await socket.send(json.dumps(update))

            async def send_audio() -> None:
                async for samples in _in_thread(pieces):
                    if stop.is_set():  # Ctrl-C: what was heard so far is the last turn
                        break
                    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
                    await socket.send(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}))
                await socket.send(json.dumps({"type": "input_audio_buffer.commit", "event_id": FINAL_COMMIT}))

            sender = asyncio.ensure_future(send_audio())
            stopped: set[str] = set()  # turns the server's turn detection ended
            last_turn = None  # the turn the final commit ended
            async for frame in socket:
                event = json.loads(frame)
                kind = event["type"]
                if kind == "error":
                    if event["error"].get("event_id") == FINAL_COMMIT:  # nothing was left open: every turn is in
                        break
                    if event["error"].get("code") == "server_busy":
                        raise SystemExit(f"speaker-transcripts live: the server at {arguments.url} already runs as many live sessions "
                                         "as it takes (LIVE_MAX_SESSIONS); try again later")
                    print(f"live: the server says: {event['error']['message']}", file=sys.stderr, flush=True)
                stopped.update([event["item_id"]] if kind == "input_audio_buffer.speech_stopped" else [])
                if kind == "input_audio_buffer.committed" and sender.done() and event["item_id"] not in stopped:
                    last_turn = event["item_id"]  # the server handles events in order: this is the final commit's turn
                if (live := read(event)) is not None:
                    show(live)
                if kind == "conversation.item.input_audio_transcription.completed" and event["item_id"] == last_turn:
                    break
            sender.result()
    except InvalidStatus as refused:
        raise SystemExit(f"speaker-transcripts live: the server refused the session (HTTP {refused.response.status_code}"
                         f"{': wrong or missing --api-key' if refused.response.status_code == 401 else ''})") from None
    except ssl.SSLCertVerificationError as error:
        raise SystemExit(f"speaker-transcripts live: the server's certificate is not trusted ({error.verify_message}): pass --ca-cert "
                         "with the CA that signed it, or set SSL_CERT_FILE") from None
    except (OSError, ConnectionClosed) as error:
        if not connected:
            raise SystemExit(f"speaker-transcripts live: could not reach a server at {arguments.url} ({error})") from None
        raise SystemExit(f"speaker-transcripts live: lost the server at {arguments.url} ({error})") from None


def realtime_url(url: str) -> str:
    """The live route's WebSocket URL from what a person types: ``host:port``, ``http(s)://host[:port]``
    or ``ws(s)://...``, with or without the route's own path (``/v1/realtime``), which is added once."""
    given = url.strip() if "://" in url else f"http://{url.strip()}"
    parts = urllib.parse.urlsplit(given)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    try:
        valid = scheme is not None and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:  # a port that is not a number
        valid = False
    if not valid:
        raise SystemExit(f"speaker-transcripts live: --url {url!r} is not a server's address; give http://host:port")
    path = parts.path.rstrip("/").removesuffix("/v1/realtime")
    return urllib.parse.urlunsplit((scheme, parts.netloc, f"{path}/v1/realtime", "intent=transcription", ""))


def _first_interrupt_finishes() -> asyncio.Event:
    """An event the first Ctrl-C sets (the audio stops, the turn in progress is finished with what was
    heard and shown); a second Ctrl-C interrupts at once."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def finish() -> None:
        stop.set()
        loop.remove_signal_handler(signal.SIGINT)
        print("live: finishing the turn in progress (Ctrl-C again to quit now)", file=sys.stderr, flush=True)

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # no signals here: Ctrl-C interrupts as before
        loop.add_signal_handler(signal.SIGINT, finish)
    return stop


async def _in_thread(pieces: Iterator[np.ndarray]) -> AsyncIterator[np.ndarray]:
    """The pieces of a blocking source (pacing sleeps, a microphone) without blocking the event loop."""
    done = object()
    while (samples := await asyncio.to_thread(next, pieces, done)) is not done:
        yield samples  # type: ignore[misc]


def backlog_line(event: Backlog) -> str:
    """What the person watching reads when the server falls behind, or has caught up."""
    if not event.behind:
        return "live: caught up"
    return f"live: the server is {event.seconds:.0f} s behind (busy); words come late, interim ones fewer, until it catches up"


class HeardLine:
    """On a terminal, the words heard so far of the turns not final yet, on one line rewritten in place
    (its end, when it is wider than the terminal) until each turn's final lines replace its words (a
    turn's final text comes a few seconds after it stopped, while the next one is heard); a pipe or a
    file gets the final lines alone."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.turns: dict[str, str] = {}  # item id -> its words heard, in the order the turns began

    @property
    def text(self) -> str:
        return "".join(self.turns.values())

    def add(self, item_id: str, words: str) -> None:
        self.turns[item_id] = self.turns.get(item_id, "") + words
        self.show()

    def show(self) -> None:
        """The words heard on the line (nothing when there are none)."""
        if not self.text.strip():
            return
        width = max(shutil.get_terminal_size().columns - 3, 10)
        self.stream.write(f"\r\x1b[K… {self.text.strip()[-width:]}")
        self.stream.flush()

    def hide(self) -> None:
        """Off the line for another line to be printed; the next words show it again, whole."""
        if self.text:
            self.stream.write("\r\x1b[K")

    def clear(self, item_id: str) -> None:
        """That turn's final lines came: its words heard are done with (the lines are printed after
        this, then ``show`` puts the other turns' words back)."""
        self.hide()
        self.turns.pop(item_id, None)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    transcript = LiveTranscript()
    heard = HeardLine(sys.stdout) if sys.stdout.isatty() else None

    def show(event: LiveEvent) -> None:
        if isinstance(event, TranscriptDelta):
            if heard is not None:
                heard.add(event.item_id, event.delta)
            return
        line = transcript.line_for(event)
        if heard is not None and (line is not None or isinstance(event, TranscriptFailed)):
            heard.clear(event.item_id)  # type: ignore[union-attr]
        elif heard is not None and isinstance(event, Backlog):
            heard.hide()
        if isinstance(event, TranscriptFailed):
            print(f"live: a turn could not be transcribed: {event.message}", file=sys.stderr, flush=True)
        elif isinstance(event, Backlog):
            print(backlog_line(event), file=sys.stderr, flush=True)
        elif line is not None:
            print(line, flush=True)
        if heard is not None and (line is not None or isinstance(event, TranscriptFailed | Backlog)):
            heard.show()  # the words of turns not final yet, back under what was just printed

    pieces = microphone_pieces(open_microphone(arguments.mic)) if arguments.mic else file_pieces(arguments.file, arguments.speed)
    try:
        if arguments.url:
            asyncio.run(remote(arguments, pieces, show))
        else:
            in_process(arguments, pieces, show)
    except KeyboardInterrupt:
        print("\nlive: stopped", file=sys.stderr)
    finally:
        if arguments.out is not None:
            arguments.out.write_text(render(transcript.result(), SAVED_FORMATS[arguments.out.suffix.lower()]), encoding="utf-8")
            print(f"live: saved the transcript to {arguments.out}", file=sys.stderr)
    return 0
