"""A live session and the file path on whatever device the settings pick (CUDA where there is one), on a
tiny random Whisper: a functional check for a GPU machine that has no model weights and no registry.

    python bench/speed/live_device_check.py

Builds the tests' tiny English Whisper (``tests/tiny_models.py``), streams the tests' 2.8-s clip twice with
quiet between (two turns) into text-only live sessions, without and with the lookahead, in 100-ms appends,
and runs the file path on the same audio. Prints where the model runs, each session's events by kind and the
encoder windows its decodes used (interim decodes at least ``SHORTEST_S``, final ones at least
``FINAL_WINDOW_S``, 3,000 frames for a looping final decode retried), and fails if a session lost a turn.
The words are nonsense (random weights): what it checks is that every path runs on the device. On a machine
without the package's dependencies, carry their wheels (av, pydantic, pydantic-settings, silero-vad,
transformers at the pinned versions: 61 MB) and put the repository on ``PYTHONPATH``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

RATE = 16000


def main() -> int:
    import tiny_models as builders

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.live.events import SpeechStarted, TranscriptCompleted
    from speaker_transcripts.live.session import LOOKAHEAD_S, LiveConfig, LiveSession
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.transcriber import Transcriber

    model = builders.build_whisper(Path(tempfile.mkdtemp()) / "whisper-en", multilingual=False)
    handler = Transcriber(ModelSettings(asr_model=str(model), diarization_model=None))
    parameter = next(handler.recognizer.model.parameters())
    print(f"model on {parameter.device}, {parameter.dtype}", flush=True)
    frames: list[int] = []
    handler.recognizer.model.get_encoder().register_forward_pre_hook(
        lambda _module, args, kwargs: frames.append((args[0] if args else kwargs["input_features"]).shape[-1]), with_kwargs=True)
    speech = as_float32(decode_file((ROOT / "tests" / "data" / "goforward.wav").read_bytes()).samples)
    quiet = np.zeros(int(1.5 * RATE), dtype=np.float32)
    audio = np.concatenate([quiet[: RATE // 2], speech, quiet, speech, quiet])
    for lookahead in (0.0, LOOKAHEAD_S):
        frames.clear()
        session = LiveSession(handler, LiveConfig(language="en", diarize=False, lookahead_s=lookahead))
        started = time.monotonic()
        events = [event for first in range(0, len(audio), RATE // 10) for event in session.append(audio[first : first + RATE // 10])]
        events += session.close()
        kinds = [type(event).__name__ for event in events]
        print(f"lookahead {lookahead:g} s: {len(events)} events in {time.monotonic() - started:.2f} s, "
              f"{ {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)} }, encoder frames {sorted(set(frames))}", flush=True)
        turns = [event for event in events if isinstance(event, TranscriptCompleted)]
        if len(turns) != 2 or sum(isinstance(event, SpeechStarted) for event in events) != 2:
            print(f"a turn was lost: {kinds}", file=sys.stderr)
            return 1
    answer = handler({"inputs": {"array": audio, "sampling_rate": RATE}, "parameters": {"language": "en", "return_timestamps": "word"}})
    print(f"file path: {len(answer['chunks'])} word chunks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
