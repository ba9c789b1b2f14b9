"""What a live turn's final decode could give: each turn decoded once more, whole, against the live text.

    .venv/bin/python bench/live_finals.py [whisper-base] [--contexts alone after_3 ...] [--window 6 12 30]

The two dev conversations stream into a live session (text only, 100-ms appends processed as they
come: a machine that keeps up), which gives the turns and the session's final text (``live``).
Then each turn is decoded again, whole, with the earlier turns' text as the prompt (``alone``); with the
audio of the earlier turns of the last 10 s before it as well (``before_10``); and with 1.5-6 s of the
audio after it (``after_3`` ...), as the session's final decode does with ``LIVE_LOOKAHEAD_S``; the words
kept are those inside the turn, before the next one (``session.said_before``). Each with the encoder's
window at least ``--window`` seconds (default the session's ``FINAL_WINDOW_S``; 30: Whisper's full
window). Prints each variant's WER per file and pooled, beside the file path's on the same audio.
A measurement of the levers, not what the session does.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from speaker_transcripts.config import InferenceConfig, ModelSettings
from speaker_transcripts.evaluation.scoring import english_normaliser, load_manifest, word_errors, words_of
from speaker_transcripts.live.events import TranscriptCompleted
from speaker_transcripts.live.session import FINAL_WINDOW_S, LiveConfig, LiveSession, said_before
from speaker_transcripts.pipeline.audio import as_float32, decode_file
from speaker_transcripts.pipeline.long_form import Piece
from speaker_transcripts.pipeline.transcriber import Transcriber
from speaker_transcripts.pipeline.transcript import Chunk

RATE = 16000
# seconds of earlier turns' audio heard too, seconds of audio after the turn heard too
CONTEXTS = {"alone": (0.0, 0.0), "before_10": (10.0, 0.0), "before_10_after_3": (10.0, 3.0),
            **{f"after_{after:g}": (0.0, after) for after in (1.5, 2.0, 2.5, 3.0, 4.0, 6.0)}}


def decode(handler: Any, samples: np.ndarray, prompt: str, window_s: float) -> list[Chunk]:
    """One decode as the session's final decode runs it: a window sized to the audio (at least ``window_s``),
    word timestamps, loops retried."""
    seconds = len(samples) / RATE
    config = InferenceConfig(language="en", return_timestamps="word", batch_size=1, assisted=False, prompt=prompt or None,
                             chunk_length_s=min(max(math.ceil(seconds), 1), 20))
    return handler.recognizer.transcribe(samples, config, seconds, pieces=[Piece(spans=((0, len(samples)),))],
                                         shortest_window_s=window_s, retry_loops=True).chunks


def live_turns(handler: Any, audio: np.ndarray) -> list[tuple[float, float, str]]:
    """(start, end, text) of each turn a text-only live session completes, fed 100 ms at a time."""
    session = LiveSession(handler, LiveConfig(language="en", diarize=False))
    events = []
    for start in range(0, len(audio), RATE // 10):
        events += session.append(audio[start : start + RATE // 10])
    events += session.close()
    return [(event.start, event.end, event.transcript) for event in events if isinstance(event, TranscriptCompleted)]


def decoded_again(
    handler: Any, audio: np.ndarray, turns: list[tuple[float, float, str]], before_s: float, after_s: float, window_s: float
) -> str:
    """Each turn decoded once more, whole, the earlier finals as its prompt, with ``before_s`` of earlier
    turns' audio before it (from a turn's start) and ``after_s`` of the audio after it; the words that
    start before the turn or belong to the next one (``session.said_before``) dropped; the encoder's window at
    least ``window_s``."""
    texts: list[str] = []
    duration = len(audio) / RATE
    for index, (start, end, _) in enumerate(turns):
        following = turns[index + 1][0] if index + 1 < len(turns) else duration
        stop = min(end + after_s, duration)
        earlier = [turn_start for turn_start, _, _ in turns[:index] if turn_start >= end - before_s] if before_s else []
        begin = max(min(earlier, default=start), stop - 28.0)
        words = decode(handler, audio[int(begin * RATE) : int(stop * RATE)], " ".join(texts)[-200:], window_s)
        timed = [Chunk(word.text, word.start + begin, word.end + begin) for word in words]
        texts.append("".join(word.text for word in said_before(timed, following) if word.start >= start - 0.05).strip())
    return " ".join(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("asr_model", nargs="?", default="whisper-base")
    parser.add_argument("--contexts", nargs="+", choices=list(CONTEXTS), default=list(CONTEXTS))
    parser.add_argument("--window", type=float, nargs="+", default=[FINAL_WINDOW_S],
                        help="shortest encoder windows to decode the turns again with, seconds (30: Whisper's full window)")
    arguments = parser.parse_args(argv)
    manifest = ROOT.parent / "shared" / "dev-audio" / "manifest.json"
    entries = [entry for entry in load_manifest(manifest) if entry.kind == "synthetic_conversation" and entry.speaker_texts]
    handler = Transcriber(ModelSettings(asr_model=arguments.asr_model, diarization_model=None))
    normalise = english_normaliser()
    totals: dict[str, Any] = {}
    for entry in entries:
        audio = as_float32(decode_file(entry.audio.read_bytes()).samples)
        turns = live_turns(handler, audio)
        variants = {"live": " ".join(text for _, _, text in turns),
                    "file": handler({"inputs": {"array": audio, "sampling_rate": RATE}, "parameters": {"language": "en"}})["text"]}
        variants |= {f"{name} (window {window:g} s)": decoded_again(handler, audio, turns, *CONTEXTS[name], window)
                     for window in arguments.window for name in arguments.contexts}
        for name, text in variants.items():
            errors = word_errors(words_of(entry.text, normalise), words_of(text, normalise))
            totals[name] = errors if name not in totals else totals[name] + errors
            print(f"{entry.name} {name}: WER {errors.rate:.1%}", flush=True)
    for name, errors in totals.items():
        print(f"pooled {name}: WER {errors.rate:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
