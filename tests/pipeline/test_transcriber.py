"""The orchestrator on tiny random models, built from the environment as the Endpoints handler
builds it: payload forms, response shape, errors, the seam."""

from __future__ import annotations

import base64
import io
import re
import wave

import numpy as np
import pytest
from pyannote.core import Annotation, Segment

from speaker_transcripts.config import CPU_BATCH, ModelSettings
from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.pipeline.diarization import Diarization, Turn
from speaker_transcripts.pipeline.phrase_speakers import Checked
from speaker_transcripts.pipeline.speaker_count import ONE_VOICE_SPREAD
from speaker_transcripts.pipeline.transcriber import Transcriber

SPEECH_SECONDS = 2.786


@pytest.fixture(scope="module")
def handler(tiny_models, tiny_pyannote):
    """Everything loaded: tiny Whisper, a seq2seq assistant and the tiny pyannote pipeline."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ASR_MODEL", str(tiny_models["whisper"]))
        env.setenv("ASSISTANT_MODEL", str(tiny_models["assistant"]))
        env.setenv("DIARIZATION_MODEL", str(tiny_pyannote))
        env.setenv("HF_TOKEN", "hf_do_not_leak")
        return Transcriber(ModelSettings.for_repository(""))


@pytest.fixture(scope="module")
def plain_handler(tiny_models):
    """ASR only, loaded from the repository path as Inference Endpoints does (/repository)."""
    return Transcriber(ModelSettings.for_repository(str(tiny_models["whisper"])))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def assert_well_formed(result: dict, duration: float) -> None:
    assert set(result) >= {"text", "chunks", "speakers", "language", "warnings"}
    for item in result["chunks"] + result["speakers"]:
        start, end = item["timestamp"]
        assert isinstance(start, float) and isinstance(end, float)
        assert 0.0 <= start <= end <= round(duration, 2) + 0.01
    if result["speakers"]:
        assert squash("".join(s["text"] for s in result["speakers"])) == squash("".join(c["text"] for c in result["chunks"]))


def test_repository_path_checkpoint_is_loaded(plain_handler, tiny_models):
    assert plain_handler.settings.asr_model == str(tiny_models["whisper"])
    assert plain_handler.diarization_pipeline is None and plain_handler.recognizer.assistant is None


def test_base64_request_without_diarization(plain_handler, speech_wav):
    result = plain_handler({"inputs": b64(speech_wav), "parameters": {"language": "en"}})
    assert_well_formed(result, SPEECH_SECONDS)
    assert result["speakers"] == [] and result["language"] == "en" and result["warnings"] == []
    assert result["chunks"][-1]["timestamp"][1] is not None


def test_raw_bytes_and_array_inputs_agree(plain_handler, speech_wav):
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    samples = as_float32(decode_file(speech_wav).samples)
    from_bytes = plain_handler({"inputs": speech_wav, "parameters": {"language": "en"}})
    from_array = plain_handler({"inputs": {"array": samples.tolist(), "sampling_rate": 16000}, "parameters": {"language": "en"}})
    assert from_bytes == from_array


def test_full_pipeline_with_assistant_and_diarization(handler, speech_wav):
    result = handler({"inputs": b64(speech_wav), "parameters": {"assisted": True, "num_speakers": 2, "batch_size": 4}})
    assert_well_formed(result, SPEECH_SECONDS)
    assert result["speakers"], "the tiny pyannote pipeline finds speakers in real speech"
    assert any("batch_size 4 was reduced to 1" in warning for warning in result["warnings"])


def test_word_level_request_with_diarization(handler, speech_wav):
    result = handler({"inputs": b64(speech_wav), "parameters": {"return_timestamps": "word", "language": "en"}})
    assert_well_formed(result, SPEECH_SECONDS)


def test_diarization_runs_on_the_shared_16k_audio_whatever_the_file_rate(handler, speech_wav):
    """A 44.1 kHz stereo upload (and a misleading sampling_rate) must give pyannote 16 kHz samples."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    samples = as_float32(decode_file(speech_wav).samples)
    t_src = np.arange(int(len(samples) * 44100 / 16000)) / 44100
    upsampled = np.interp(t_src, np.arange(len(samples)) / 16000, samples)
    stereo = np.stack([upsampled, upsampled], axis=1)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(2), writer.setsampwidth(2), writer.setframerate(44100)
        writer.writeframes((stereo * 32767).astype("<i2").tobytes())

    seen = {}

    def recording_pipeline(audio, **hints):
        seen.update(rate=audio["sample_rate"], shape=tuple(audio["waveform"].shape), hints=hints)
        annotation = Annotation()
        annotation[Segment(0.0, 30.0)] = "SPEAKER_00"
        return annotation

    original = handler.diarization_pipeline
    handler.diarization_pipeline = recording_pipeline
    try:
        result = handler({"inputs": b64(buffer.getvalue()), "parameters": {"sampling_rate": 8000, "max_speakers": 3}})
    finally:
        handler.diarization_pipeline = original
    assert seen["rate"] == 16000 and seen["shape"][0] == 1
    assert seen["shape"][1] == pytest.approx(SPEECH_SECONDS * 16000, abs=160)
    assert seen["hints"] == {"max_speakers": 3}
    assert_well_formed(result, SPEECH_SECONDS)
    assert {s["speaker"] for s in result["speakers"]} == {"SPEAKER_00"}


def test_seam_accepts_diarize_output_and_merges_by_time(handler, speech_wav):
    from pyannote.audio.pipelines.speaker_diarization import DiarizeOutput

    def two_speakers(audio, **hints):
        annotation = Annotation()
        annotation[Segment(0.0, 1.4)] = "ALICE"
        annotation[Segment(1.4, 3.0)] = "BOB"
        return DiarizeOutput(speaker_diarization=annotation, exclusive_speaker_diarization=annotation,
                             speaker_embeddings=None)

    original = handler.diarization_pipeline
    handler.diarization_pipeline = two_speakers
    try:
        result = handler({"inputs": b64(speech_wav), "parameters": {"return_timestamps": "word", "language": "en"}})
    finally:
        handler.diarization_pipeline = original
    assert_well_formed(result, SPEECH_SECONDS)
    assert result["speakers"], "word chunks must be attributed to the seam's speakers"
    for segment in result["speakers"]:
        start, end = segment["timestamp"]
        assert segment["speaker"] in {"ALICE", "BOB"}
        if end <= 1.4:
            assert segment["speaker"] == "ALICE"
        if start >= 1.4:
            assert segment["speaker"] == "BOB"


def test_silence_and_noise_are_empty_results_not_errors(handler):
    silence = np.zeros(16000 * 3, dtype=np.float32)
    noise = (np.random.default_rng(0).standard_normal(16000 * 3) * 0.1).astype(np.float32)
    for samples in (silence, noise):
        result = handler({"inputs": {"array": samples.tolist(), "sampling_rate": 16000}})
        assert (result["text"], result["chunks"], result["speakers"]) == ("", [], [])
        assert "no speech detected" in result["warnings"] and result["decoding"] == "none"


@pytest.mark.parametrize("long_form", ["vad", "chunked"])
def test_with_the_gate_off_audio_without_speech_is_decoded_anyway(plain_handler, monkeypatch, long_form):
    """SPEECH_GATE=false: a user whose audio Silero misses (music, singing) still gets Whisper's reading."""
    monkeypatch.setattr(plain_handler, "settings", plain_handler.settings.model_copy(update={"speech_gate": False}))
    silence = np.zeros(16000 * 3, dtype=np.float32)
    result = plain_handler({"inputs": {"array": silence, "sampling_rate": 16000}, "parameters": {"long_form": long_form}})
    assert result["decoding"] != "none" and "no speech detected" not in result["warnings"]


def test_speaker_hints_without_diarization_warn(plain_handler, speech_wav):
    result = plain_handler({"inputs": b64(speech_wav), "parameters": {"num_speakers": 2}})
    assert any("no diarization model is loaded" in warning for warning in result["warnings"])


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("just a string", "JSON object"),
        ({"parameters": {}}, "inputs"),
        ({"inputs": "%%% not base64 %%%"}, "not valid base64"),
        ({"inputs": b64(b"hello, I am a text file")}, "could not decode|no audio"),
        ({"inputs": ""}, "empty"),
        ({"inputs": "UklGRg==", "parameters": {"batch_size": 0}}, "batch_size"),
        ({"inputs": "UklGRg==", "parameters": "fast"}, "must be a JSON object"),
        ({"inputs": "UklGRg==", "parameters": {"min_speakers": 3, "max_speakers": 1}}, "min_speakers"),
        ({"inputs": "UklGRg==", "parameters": {"language": "xx"}}, "unknown language"),
    ],
)
def test_bad_requests_raise_invalid_request_error(handler, payload, message):
    with pytest.raises(InvalidRequestError, match=message):
        handler(payload)


def test_assisted_without_assistant_and_truncated_audio(plain_handler, speech_wav):
    with pytest.raises(InvalidRequestError, match="ASSISTANT_MODEL"):
        plain_handler({"inputs": b64(speech_wav), "parameters": {"assisted": True}})
    with pytest.raises(InvalidRequestError, match="truncated"):
        plain_handler({"inputs": b64(speech_wav[:5000])})


def test_handler_keeps_serving_after_errors(plain_handler, speech_wav):
    for bad in ({"inputs": "???"}, {"inputs": b"\x00" * 100}):
        with pytest.raises(InvalidRequestError):
            plain_handler(bad)
    assert plain_handler({"inputs": b64(speech_wav), "parameters": {"language": "en"}})["chunks"]


def test_token_not_in_response_or_settings_repr(handler, speech_wav):
    result = handler({"inputs": b64(speech_wav), "parameters": {"language": "en"}})
    assert "hf_do_not_leak" not in repr(result) and "hf_do_not_leak" not in repr(handler.settings)


def test_missing_diarization_model_fails_at_start_with_advice(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper"]))
    monkeypatch.setenv("DIARIZATION_MODEL", str(tmp_path / "no-such-pipeline"))
    with pytest.raises(RuntimeError, match="DIARIZATION_MODEL=.*no-such-pipeline: no such folder .*pyannote-campplus"):
        Transcriber(ModelSettings.for_repository(""))
    (tmp_path / "not-a-pipeline").mkdir()
    monkeypatch.setenv("DIARIZATION_MODEL", str(tmp_path / "not-a-pipeline"))
    with pytest.raises(RuntimeError, match="DIARIZATION_MODEL=.*could not be loaded.*HF_TOKEN"):
        Transcriber(ModelSettings.for_repository(""))


def test_diarize_false_skips_the_diarization_step(handler, speech_wav):
    calls = []
    original = handler.diarization_pipeline
    handler.diarization_pipeline = lambda audio, **hints: calls.append(hints)
    try:
        result = handler({"inputs": speech_wav, "parameters": {"language": "en", "diarize": False}})
    finally:
        handler.diarization_pipeline = original
    assert calls == [] and result["speakers"] == [] and result["chunks"]
    assert result["duration"] == pytest.approx(SPEECH_SECONDS, abs=0.001)


def test_prompt_is_used_and_an_overlong_one_is_refused(plain_handler, speech_wav):
    prompted = plain_handler({"inputs": speech_wav, "parameters": {"language": "en", "prompt": "Go forward."}})
    assert_well_formed(prompted, SPEECH_SECONDS)
    with pytest.raises(InvalidRequestError, match="prompt is .* tokens long"):
        plain_handler({"inputs": speech_wav, "parameters": {"prompt": "word " * 400}})
    for special in ("<|endoftext|>", "Names: <|0.00|> Ada"):
        with pytest.raises(InvalidRequestError, match="special tokens"):
            plain_handler({"inputs": speech_wav, "parameters": {"prompt": special}})


def test_progress_reports_seconds_decoded(plain_handler, speech_wav):
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    long_audio = np.tile(as_float32(decode_file(speech_wav).samples), 30)  # 84 s: several 30-s windows
    seen: list[float] = []
    plain_handler({"inputs": {"array": long_audio, "sampling_rate": 16000}, "parameters": {"language": "en", "batch_size": 1}},
                  on_progress=seen.append)
    assert len(seen) >= 4 and seen == sorted(seen)
    assert seen[-1] == pytest.approx(len(long_audio) / 16000, abs=0.01)


def test_progress_moves_during_one_batch(plain_handler, speech_wav):
    """At the default batch size a minute is one batch; the bar must still move while it decodes
    (with the default speech-aligned decoding; ``chunked`` moves once per batch of windows)."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    speech = as_float32(decode_file(speech_wav).samples)
    pause = np.zeros(8000, dtype=np.float32)
    minute = np.tile(np.concatenate([speech, pause]), 18)  # 59 s
    seen: list[float] = []
    plain_handler({"inputs": {"array": minute, "sampling_rate": 16000}, "parameters": {"language": "en"}},
                  on_progress=seen.append)
    before_the_end = [seconds for seconds in seen if seconds < len(minute) / 16000 - 0.01]
    assert len(set(before_the_end)) >= 3 and seen == sorted(seen), seen


def test_word_timed_decodes_run_word_timed_batch_rows_unless_the_client_chose_a_batch(plain_handler, speech_wav):
    """Each word-timed row holds its encoder output, the decoder's keys and values over it and its
    alignment heads' attention: a diarized 10-min file peaked 1.1 GB above the loaded models at 12
    rows, 0.47 GB at 4, in the same time (docs/performance.md). A batch the client chose is kept."""
    from speaker_transcripts.config import WORD_TIMED_BATCH
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    speech = as_float32(decode_file(speech_wav).samples)
    minutes = np.tile(np.concatenate([speech, np.zeros(8000, dtype=np.float32)]), 54)  # 178 s: 6 pieces
    rows: list[int] = []
    encoder = plain_handler.recognizer.model.get_encoder()
    handle = encoder.register_forward_hook(lambda _module, _inputs, output: rows.append(output[0].shape[0]))
    try:
        for batch in ({}, {"batch_size": 6}):
            rows.clear()
            parameters = {"language": "en", "return_timestamps": "word", **batch}
            plain_handler({"inputs": {"array": minutes, "sampling_rate": 16000}, "parameters": parameters})
            assert max(rows) == (6 if batch else WORD_TIMED_BATCH) and sum(rows) == 6, (batch, rows)
    finally:
        handle.remove()


def test_should_stop_ends_decoding_within_a_step_and_the_handler_keeps_serving(plain_handler, speech_wav):
    from speaker_transcripts.errors import RequestAbandoned
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    minute = np.tile(as_float32(decode_file(speech_wav).samples), 22)
    body = {"inputs": {"array": minute, "sampling_rate": 16000}, "parameters": {"language": "en", "batch_size": 1}}
    asked: list[bool] = []

    def stop_on_the_second_decoder_step() -> bool:  # asked once at the lock, then at every decoder step
        asked.append(len(asked) >= 2)
        return asked[-1]

    with pytest.raises(RequestAbandoned):
        plain_handler(body, should_stop=stop_on_the_second_decoder_step)
    assert asked == [False, False, True], "decoding ran on after it was told to stop"
    with pytest.raises(RequestAbandoned, match="waited for the models"):
        plain_handler(body, should_stop=lambda: True)
    assert_well_formed(plain_handler({"inputs": speech_wav}), SPEECH_SECONDS)


def test_speech_aligned_pieces_put_text_on_the_file_clock(plain_handler, speech_wav):
    """Speech after 20 s of silence: nothing is decoded in the silence, and times are the file's."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    speech = as_float32(decode_file(speech_wav).samples)
    audio = np.concatenate([np.zeros(20 * 16000, dtype=np.float32), speech, np.zeros(16000, dtype=np.float32)])
    result = plain_handler({"inputs": {"array": audio, "sampling_rate": 16000}, "parameters": {"language": "en"}})
    assert_well_formed(result, len(audio) / 16000)
    assert result["chunks"] and all(chunk["timestamp"][0] >= 19.7 for chunk in result["chunks"]), result["chunks"]
    assert all(chunk["timestamp"][1] <= 20 + SPEECH_SECONDS + 0.3 for chunk in result["chunks"])


def test_duration_limit_applies_to_the_handler(tiny_models, speech_wav, monkeypatch):
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper_en"]))
    monkeypatch.setenv("MAX_AUDIO_SECONDS", "2")
    from speaker_transcripts.errors import AudioTooLongError

    with pytest.raises(AudioTooLongError, match="limit of 2 s"):
        Transcriber(ModelSettings.for_repository(""))({"inputs": speech_wav})


@pytest.fixture
def seamed(plain_handler):
    """The ASR-only handler with the two-speaker stand-in (ALICE < 1.4 s < BOB) in the seam."""
    from conftest import two_speakers

    plain_handler.diarization_pipeline = two_speakers
    yield plain_handler
    plain_handler.diarization_pipeline = None


def test_word_attribution_is_the_default_and_labels_every_word(seamed, speech_wav):
    from speaker_transcripts.pipeline.diarization import Turn, word_speakers
    from speaker_transcripts.pipeline.transcript import Chunk

    turns = [Turn("ALICE", 0.0, 1.4), Turn("BOB", 1.4, 3.0)]
    result = seamed({"inputs": speech_wav, "parameters": {"language": "en", "return_timestamps": "word"}})
    assert_well_formed(result, SPEECH_SECONDS)
    assert result["chunks"] and all("speaker" in chunk for chunk in result["chunks"])
    words = [Chunk(c["text"], *c["timestamp"]) for c in result["chunks"]]
    assert [c["speaker"] for c in result["chunks"]] == word_speakers(words, turns)
    labelled = [c for c in result["chunks"] if c["text"].strip()]
    runs = [c["speaker"] for i, c in enumerate(labelled) if i == 0 or c["speaker"] != labelled[i - 1]["speaker"]]
    assert [s["speaker"] for s in result["speakers"]] == runs, "one speaker segment per run of words"


def test_segment_chunks_with_word_attribution_never_span_two_speakers(seamed, speech_wav):
    words = seamed({"inputs": speech_wav, "parameters": {"language": "en", "return_timestamps": "word"}})
    segments = seamed({"inputs": speech_wav, "parameters": {"language": "en"}})
    assert all("speaker" not in chunk for chunk in segments["chunks"])
    assert squash("".join(c["text"] for c in segments["chunks"])) == squash("".join(c["text"] for c in words["chunks"]))
    assert segments["speakers"] == words["speakers"]
    for chunk in segments["chunks"]:
        start, end = chunk["timestamp"]
        inside = [s["speaker"] for s in segments["speakers"] if s["timestamp"][0] <= start and end <= s["timestamp"][1]]
        assert inside, f"chunk {chunk} crosses a speaker change"


def test_segment_attribution_keeps_whisper_segments(seamed, speech_wav):
    plain = seamed({"inputs": speech_wav, "parameters": {"language": "en", "diarize": False}})
    by_segment = seamed({"inputs": speech_wav, "parameters": {"language": "en", "attribution": "segment"}})
    assert by_segment["chunks"] == plain["chunks"] and by_segment["text"] == plain["text"]
    assert len(by_segment["speakers"]) <= len(by_segment["chunks"])


def test_attribution_without_diarization_is_ignored_with_a_warning(plain_handler, speech_wav):
    result = plain_handler({"inputs": speech_wav, "parameters": {"language": "en", "attribution": "word"}})
    assert "attribution ignored: this request is not diarized" in result["warnings"]


def test_auto_tries_both_paths_then_keeps_the_faster(handler, speech_wav, monkeypatch):
    from speaker_transcripts.pipeline.decoding_policy import DecodingPolicy

    monkeypatch.setattr(handler, "decoding_policy", DecodingPolicy(30.0))
    request = {"inputs": speech_wav, "parameters": {"language": "en", "diarize": False}}
    first, second, third = (handler(request) for _ in range(3))
    batched = f"batched (batch_size {CPU_BATCH})"  # the CPU's default batch (config.CPU_BATCH)
    assert (first["decoding"], second["decoding"]) == ("assisted", batched)
    rates = handler.decoding_policy.snapshot()
    faster = "assisted" if rates["assisted"] < rates["batched"] else batched
    assert third["decoding"] == faster and first["warnings"] == [], "auto lowers batch_size without a warning"
    assert first["text"] == second["text"] == third["text"], "assisted decoding is token-identical to greedy"

    monkeypatch.setattr(handler, "decoding_policy", DecodingPolicy(2.0))  # the clip is 2.8 s: beyond the regime
    assert handler(request)["decoding"] == batched
    forced = handler({**request, "parameters": {**request["parameters"], "assisted": True}})
    assert forced["decoding"] == "assisted"


def test_warm_up_runs_at_start_up_unless_disabled(tiny_models, monkeypatch):
    from speaker_transcripts.pipeline.asr import SpeechRecognizer

    calls = []
    monkeypatch.setattr(SpeechRecognizer, "warm_up", lambda self: calls.append(self))
    monkeypatch.setenv("ASR_MODEL", str(tiny_models["whisper_en"]))
    Transcriber(ModelSettings.for_repository(""))
    monkeypatch.setenv("WARMUP", "false")
    Transcriber(ModelSettings.for_repository(""))
    assert len(calls) == 1


def test_diarization_runs_beside_asr_in_its_own_thread(plain_handler, speech_wav):
    import threading

    from conftest import two_speakers

    seen = {}

    def recording(audio, **hints):
        seen["thread"] = threading.current_thread().name
        return two_speakers(audio, **hints)

    plain_handler.diarization_pipeline = recording
    try:
        result = plain_handler({"inputs": speech_wav, "parameters": {"language": "en"}})
    finally:
        plain_handler.diarization_pipeline = None
    assert seen["thread"].startswith("diarization") and seen["thread"] != threading.current_thread().name
    assert {segment["speaker"] for segment in result["speakers"]} <= {"ALICE", "BOB"} and result["speakers"]


def test_freed_memory_goes_back_to_the_system_after_every_request(plain_handler, speech_wav, monkeypatch):
    """Without it glibc keeps a heavy request's heap and the next one peaks on top of it
    (bench/probe.py: 1.5 GB above idle against 0.97 GB)."""
    from speaker_transcripts.pipeline import transcriber as handler_module
    trims = []
    monkeypatch.setattr(handler_module, "return_freed_memory", lambda: trims.append(1))
    plain_handler({"inputs": base64.b64encode(speech_wav).decode(), "parameters": {"language": "en"}})
    with pytest.raises(InvalidRequestError):
        plain_handler({"inputs": base64.b64encode(speech_wav).decode(), "parameters": {"prompt": "<|endoftext|>"}})
    assert trims == [1, 1]


def test_what_loading_and_the_warm_up_freed_goes_back_to_the_system(tiny_models, monkeypatch):
    """An idle process kept the heap that loading freed: 1,383 MB resident after loading whisper-base
    against 1,290 MB trimmed (bench/memory/memory.py); and the CUDA libraries' pages on a GPU-less machine
    (an idle server 1,374 -> 1,174 MB with the float16 token table, 6 December)."""
    from speaker_transcripts.pipeline import asr
    from speaker_transcripts.pipeline import transcriber as handler_module
    events = []
    monkeypatch.setattr(handler_module, "return_freed_memory", lambda: events.append("trim"))
    monkeypatch.setattr(handler_module, "release_gpu_library_pages", lambda: events.append("GPU libraries"))
    monkeypatch.setattr(asr.SpeechRecognizer, "warm_up", lambda self: events.append("warm-up"))
    Transcriber(ModelSettings.for_repository(str(tiny_models["whisper"])))
    assert events == ["warm-up", "trim", "GPU libraries"], "torch's CUDA libraries are handed back once the models are in"


def test_an_abandoned_request_stops_pyannote_at_its_next_step(handler, speech_wav):
    """With diarization on, a 504 used to leave the slot busy until pyannote finished (19 s for
    a 5-s deadline); its progress hook now ends the run at the next segmentation or embedding batch."""
    from speaker_transcripts.errors import RequestAbandoned
    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from speaker_transcripts.pipeline.diarization import diarize

    samples = as_float32(decode_file(speech_wav).samples)
    asked = []
    with pytest.raises(RequestAbandoned):
        diarize(handler.diarization_pipeline, samples, 16000, {}, should_stop=lambda: asked.append(1) or True)
    assert len(asked) == 1, "stopped at the first step"
    assert diarize(handler.diarization_pipeline, samples, 16000, {}, should_stop=lambda: False) is not None


def test_a_request_runs_with_its_heap_trimmed_and_the_trimmer_ends_with_it(plain_handler, speech_wav, monkeypatch):
    """Whisper's and pyannote's freed batches go back while the request runs (heap.trimmed_every: a
    30-min diarized request peaked at 1.98-2.39 GiB with a trim every 10 s from pyannote's hook
    alone), and the trimmer stops with the request (a failed block too: tests/pipeline/test_heap.py)."""
    from contextlib import contextmanager

    from speaker_transcripts.pipeline import transcriber as handler_module

    events = []

    @contextmanager
    def recorded_trimming():
        events.append("trimming")
        try:
            yield
        finally:
            events.append("stopped")

    monkeypatch.setattr(handler_module, "trimmed_every", recorded_trimming)
    monkeypatch.setattr(handler_module, "return_freed_memory", lambda: events.append("trim"))
    real_transcribe = handler_module.Transcriber._transcribe
    monkeypatch.setattr(handler_module.Transcriber, "_transcribe", lambda self, *a: events.append("request") or real_transcribe(self, *a))
    plain_handler({"inputs": base64.b64encode(speech_wav).decode(), "parameters": {"language": "en"}})
    assert events == ["trimming", "request", "stopped", "trim"]


def test_diarization_stops_when_asr_fails_and_asr_error_is_the_one_raised(handler, speech_wav, monkeypatch):
    import threading
    import time

    from speaker_transcripts.pipeline import transcriber

    told_to_stop: list[bool] = []
    diarizing = threading.Event()

    def patient_diarize(pipeline, samples, rate, hints, should_stop):
        diarizing.set()
        guard = time.monotonic() + 120  # a failure guard only: the stop comes as soon as ASR has failed
        while not should_stop() and time.monotonic() < guard:
            time.sleep(0.01)
        told_to_stop.append(should_stop())
        return transcriber.Diarization([], [])

    def failing_asr(*args, **kwargs):
        diarizing.wait(120)  # fail while diarization is running
        raise RuntimeError("the device went away")

    monkeypatch.setattr(transcriber, "diarize", patient_diarize)
    monkeypatch.setattr(handler.recognizer, "transcribe", failing_asr)
    with pytest.raises(RuntimeError, match="the device went away"):
        handler({"inputs": b64(speech_wav), "parameters": {"language": "en"}})
    assert told_to_stop == [True]


def test_streaming_hands_over_the_first_piece_while_the_rest_is_still_decoding(plain_handler, speech_wav):
    """42 s of speech make two pieces, which used to be one batch: the first segment came only when
    both were decoded. Now the first piece is decoded alone and handed over before the rest start."""
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    speech = as_float32(decode_file(speech_wav).samples)
    gap = np.zeros(16000, dtype=np.float32)
    audio = np.concatenate([np.concatenate([speech, gap]) for _ in range(11)])
    events: list[str] = []
    hook = plain_handler.recognizer.model.get_decoder().register_forward_hook(lambda *_: events.append("step"))
    try:
        plain_handler(
            {"inputs": {"array": audio.tolist(), "sampling_rate": 16000}, "parameters": {"language": "en", "batch_size": 8}},
            on_segment=lambda chunk: events.append("segment"),
        )
    finally:
        hook.remove()
    first_segment = events.index("segment")
    assert "step" in events[first_segment:], "decoding went on after the first segment was handed over"


def test_fewer_speakers_than_asked_for_is_said_in_the_response(handler, speech_wav, monkeypatch):
    from conftest import two_speakers

    monkeypatch.setattr(handler, "diarization_pipeline", two_speakers)
    asked = handler({"inputs": b64(speech_wav), "parameters": {"language": "en", "num_speakers": 3}})
    assert "asked for exactly 3 speakers, but diarization found 2 in this audio" in asked["warnings"]
    enough = handler({"inputs": b64(speech_wav), "parameters": {"language": "en", "min_speakers": 2}})
    assert not any("asked for" in warning for warning in enough["warnings"])


def test_one_voice_found_in_a_short_recording_is_questioned_unless_the_count_was_given(handler, speech_wav, monkeypatch):
    """Quick two-person exchanges came out as one speaker with no word said; now the answer says
    the count may be short when that voice's phrases sound like two people, and says nothing when the
    client gave num_speakers."""
    from pyannote.core import Annotation, Segment

    def one_speaker(audio, **hints):
        annotation = Annotation()
        annotation[Segment(0.0, 2.8)] = "ALICE"
        return annotation

    monkeypatch.setattr(handler, "diarization_pipeline", one_speaker)
    monkeypatch.setattr(handler, "_checked_by_phrases", lambda found, *_: Checked(found, ONE_VOICE_SPREAD + 0.2))
    guessed = handler({"inputs": b64(speech_wav), "parameters": {"language": "en"}})
    assert any("to one voice" in warning and "num_speakers" in warning for warning in guessed["warnings"])
    given = handler({"inputs": b64(speech_wav), "parameters": {"language": "en", "num_speakers": 1}})
    assert not any("voice" in warning for warning in given["warnings"])


def test_the_stages_a_person_waits_on_are_announced_in_order(seamed, speech_wav):
    import threading
    import time as clock

    from speaker_transcripts.pipeline import transcriber as module

    real_diarize, real_transcribe = module.diarize, seamed.recognizer.transcribe
    asr_done = threading.Event()

    def slow_diarize(*args, **kwargs):  # pyannote still busy when Whisper is done, however slow the machine
        asr_done.wait(60)
        clock.sleep(0.5)
        return real_diarize(*args, **kwargs)

    def transcribe(*args, **kwargs):
        try:
            return real_transcribe(*args, **kwargs)
        finally:
            asr_done.set()

    stages: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "diarize", slow_diarize)
        patch.setattr(seamed.recognizer, "transcribe", transcribe)
        seamed({"inputs": b64(speech_wav), "parameters": {"language": "en"}}, on_stage=stages.append)
    assert stages == ["finding speech", "transcribing", "diarizing"]
    stages.clear()
    seamed({"inputs": b64(speech_wav), "parameters": {"task": "diarize"}}, on_stage=stages.append)
    assert stages == ["diarizing"]


@pytest.mark.parametrize(
    ("parameters", "may_add"),
    [({}, True), ({"num_speakers": 1}, False), ({"max_speakers": 1}, False), ({"max_speakers": 9}, True), ({"attribution": "segment"}, None)],
)
def test_the_phrase_check_runs_on_word_attribution_and_adds_speakers_only_where_the_client_left_room(
    handler, speech_wav, monkeypatch, parameters, may_add
):
    """pipeline/phrase_speakers.py gets the words, the decoded samples and the seam's embedding model;
    its answer is what the words are attributed from and what the timeline shows."""
    from speaker_transcripts.pipeline import transcriber

    seen = {}

    def split_everything(found, words, samples, rate, embed, may_add):
        seen.update(words=len(words), seconds=len(samples) / rate, may_add=may_add, embeds=embed(samples[:rate]).shape)
        return Checked(Diarization([Turn("CHECKED", 0.0, 3.0)], [Turn("CHECKED", 0.0, 3.0)], {}))

    monkeypatch.setattr(transcriber, "checked", split_everything)
    result = handler({"inputs": b64(speech_wav), "parameters": {"language": "en", **parameters}})
    if may_add is None:
        assert seen == {}, "segment attribution has no word times to cut phrases by"
        return
    assert seen["may_add"] is may_add and seen["words"] > 0
    assert seen["seconds"] == pytest.approx(SPEECH_SECONDS, abs=0.01) and len(seen["embeds"]) == 1
    assert {segment["speaker"] for segment in result["speakers"]} == {"CHECKED"}
    assert result["diarization"] == [{"speaker": "CHECKED", "start": 0.0, "end": 3.0}]


@pytest.mark.parametrize(("spread", "warned"), [(0.1, False), (0.9, True), (None, False)])
def test_one_voice_is_questioned_only_when_the_phrase_check_heard_two_people(handler, speech_wav, monkeypatch, spread, warned):
    """A short recording heard as one voice gets the count warning when the phrase check's halves of that
    voice's phrases lie far apart (``speaker_count.ONE_VOICE_SPREAD``); close halves are one person talking
    alone, and too few phrases to tell are no evidence of a second voice."""
    from speaker_transcripts.pipeline import transcriber

    one_voice = Diarization([Turn("SPEAKER_00", 0.0, 3.0)], [Turn("SPEAKER_00", 0.0, 3.0)], {})
    monkeypatch.setattr(transcriber, "checked", lambda found, *_: Checked(one_voice, spread))
    result = handler({"inputs": b64(speech_wav), "parameters": {"language": "en"}})
    assert any("to one voice" in warning for warning in result["warnings"]) is warned, result["warnings"]


def test_a_speaker_the_phrase_check_adds_can_be_named_by_a_clip(handler, speech_wav, monkeypatch):
    """Names are given after the phrase check: a voice diarization had merged into another's, split
    off by the check, is matched with the enrolment clips like any other speaker."""
    from speaker_transcripts.pipeline import transcriber

    def split_off(found, words, samples, rate, embed, may_add):
        voice = embed(samples)
        return Checked(Diarization([Turn("SPEAKER_07", 0.0, 3.0)], [Turn("SPEAKER_07", 0.0, 3.0)], {"SPEAKER_07": voice}))

    monkeypatch.setattr(transcriber, "checked", split_off)
    clip = {"name": "Ann", "audio": b64(speech_wav)}
    result = handler({"inputs": b64(speech_wav), "parameters": {"language": "en", "known_speakers": [clip]}})
    assert {segment["speaker"] for segment in result["speakers"]} == {"Ann"}, result["known_speakers"]
    assert result["known_speakers"][0]["named"] is True
