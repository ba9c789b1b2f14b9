"""Every input form and container decodes to 16 kHz mono; bad input gets a clear error."""

from __future__ import annotations

import base64
import io

import av
import numpy as np
import pytest
from audio_files import float_wav, pcm_wav, stills_beside_audio

from speaker_transcripts.errors import AudioTooLongError, InvalidRequestError
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, STORED, as_float32, decode_file, decode_inputs, from_array

SPEECH_SECONDS = 2.786  # tests/data/goforward.wav


def tone(seconds: float, rate: int, channels: int = 1, frequency: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    mono = 0.5 * np.sin(2 * np.pi * frequency * t)
    return np.tile(mono, (channels, 1)).astype(np.float32)


def encode(samples: np.ndarray, rate: int, container: str, codec: str) -> bytes:
    """Encode with FFmpeg (through PyAV) into a real file of the given container."""
    layout = "mono" if samples.shape[0] == 1 else "stereo"
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container) as output:
        stream = output.add_stream(codec, rate=rate, layout=layout)
        sample_format = stream.codec_context.codec.audio_formats[0].name
        frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout=layout)  # planar: channels x samples
        frame.sample_rate = rate
        resampler = av.AudioResampler(format=sample_format, layout=layout, rate=rate)
        for piece in resampler.resample(frame):
            for packet in stream.encode(piece):
                output.mux(packet)
        for packet in stream.encode(None):
            output.mux(packet)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("container", "codec", "rate"),
    [("flac", "flac", 44100), ("mp3", "libmp3lame", 44100), ("ogg", "libopus", 48000),
     ("wav", "pcm_s24le", 22050), ("ipod", "aac", 32000), ("webm", "libopus", 48000)],
)
def test_containers_decode_to_16k_mono(container, codec, rate):
    decoded = decode_file(encode(tone(2.0, rate, channels=2), rate, container, codec))
    assert decoded.samples.dtype == STORED and decoded.samples.ndim == 1
    assert decoded.duration == pytest.approx(2.0, abs=0.1)
    spectrum = np.abs(np.fft.rfft(decoded.samples[: SAMPLING_RATE]))
    assert np.argmax(spectrum) == pytest.approx(440, abs=3)  # same pitch: resampled, not just relabelled


@pytest.mark.parametrize("rate", [8000, 16000, 44100, 48000])
@pytest.mark.parametrize("channels", [1, 2, 6, 9, 32, 64])
def test_any_rate_and_channel_count_at_the_same_level(rate, channels):
    """Channels are averaged with equal weights: FFmpeg's downmix refused 9, 32 and 64 channels
    and clipped 8 (a 0.24 sine came out at 1.08)."""
    decoded = decode_file(pcm_wav(tone(1.5, rate, channels), rate))
    assert decoded.duration == pytest.approx(1.5, abs=0.01)
    assert np.abs(as_float32(decoded.samples)).max() == pytest.approx(0.5, abs=0.02)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_files_with_nan_or_infinite_samples_are_refused_like_arrays(bad):
    samples = tone(1.0, 16000)[0]
    assert decode_file(float_wav(samples, 16000)).duration == pytest.approx(1.0)
    samples[8000] = bad
    with pytest.raises(InvalidRequestError, match="NaN or infinite"):
        decode_file(float_wav(samples, 16000))


def test_array_duration_is_checked_before_resampling(monkeypatch):
    from speaker_transcripts.pipeline import audio
    monkeypatch.setattr(audio, "_resample", lambda *_: pytest.fail("resampled audio that is over the limit"))
    with pytest.raises(AudioTooLongError, match="2400.0 s"):
        decode_inputs({"array": np.zeros(2_400_000, dtype=np.float32), "sampling_rate": 1000}, max_seconds=120)


def test_an_integer_beyond_float_range_is_a_clear_error():
    with pytest.raises(InvalidRequestError, match="only numbers"):
        decode_inputs({"array": [0, 10**400, 0], "sampling_rate": 16000})


def test_real_speech_file(speech_wav):
    assert decode_file(speech_wav).duration == pytest.approx(SPEECH_SECONDS, abs=0.01)


def test_base64_string_with_and_without_data_url(speech_wav):
    encoded = base64.b64encode(speech_wav).decode()
    plain = decode_inputs(encoded)
    with_prefix = decode_inputs("data:audio/wav;base64," + encoded)
    urlsafe = decode_inputs(base64.urlsafe_b64encode(speech_wav).decode().rstrip("="))
    assert np.array_equal(plain.samples, with_prefix.samples) and np.array_equal(plain.samples, urlsafe.samples)


def test_raw_bytes_and_base64_text_bytes(speech_wav):
    assert decode_inputs(speech_wav).duration == pytest.approx(SPEECH_SECONDS, abs=0.01)
    assert decode_inputs(base64.b64encode(speech_wav)).duration == pytest.approx(SPEECH_SECONDS, abs=0.01)


def test_decoded_array_with_its_rate():
    decoded = decode_inputs({"array": tone(1.0, 44100)[0].tolist(), "sampling_rate": 44100})
    assert decoded.duration == pytest.approx(1.0, abs=0.01)
    assert decode_inputs(tone(1.0, 8000)[0], sampling_rate=8000).duration == pytest.approx(1.0, abs=0.01)
    assert decode_inputs(tone(1.0, 16000, channels=2)).duration == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ("this is not base64 !!!", "not valid base64"),
        ("", "empty string"),
        (b"", "empty"),
        (base64.b64encode(b"just some text, not audio at all").decode(), "could not decode|no audio stream"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 200, "could not decode|no audio stream"),
        (b"PK\x03\x04" + b"\x00" * 200, "could not decode|no audio stream"),
        (12345, "must be base64"),
        ({"sampling_rate": 16000}, "needs an 'array'"),
        ({"array": [], "sampling_rate": 16000}, "empty"),
        ({"array": ["a", "b"], "sampling_rate": 16000}, "only numbers"),
        ({"array": [0.0, float("nan")], "sampling_rate": 16000}, "NaN"),
        ({"array": [0.0] * 100, "sampling_rate": "fast"}, "sampling_rate"),
    ],
)
def test_bad_inputs_raise_one_clear_error(inputs, message):
    with pytest.raises(InvalidRequestError, match=message):
        decode_inputs(inputs)


def test_truncated_wav_is_refused(speech_wav):
    with pytest.raises(InvalidRequestError, match="truncated"):
        decode_file(speech_wav[: len(speech_wav) // 2])


def test_wav_header_without_frames_is_refused():
    with pytest.raises(InvalidRequestError, match="no audio samples"):
        decode_file(pcm_wav(np.zeros((1, 0), dtype=np.float32), 16000))


def test_truncated_mp3_is_refused():
    mp3 = encode(tone(4.0, 44100), 44100, "mp3", "libmp3lame")
    with pytest.raises(InvalidRequestError, match="truncated|could not decode"):
        decode_file(mp3[: len(mp3) // 3])


def test_invalid_error_is_a_value_error():
    with pytest.raises(ValueError):
        from_array([0.0] * 10, 5)


def test_audio_over_the_duration_limit_is_refused_in_every_form(speech_wav):
    samples = decode_file(speech_wav).samples
    for inputs in (speech_wav, base64.b64encode(speech_wav).decode(), {"array": samples.tolist(), "sampling_rate": 16000}):
        with pytest.raises(AudioTooLongError, match="limit of 2 s"):
            decode_inputs(inputs, max_seconds=2)
    assert decode_inputs(speech_wav, max_seconds=3).duration == pytest.approx(SPEECH_SECONDS, abs=0.01)


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 44100, 48000])
def test_audio_exactly_as_long_as_the_limit_is_accepted_and_one_sample_more_is_not(rate):
    """Frame durations summed as floats passed the limit on a file exactly as long as it (a 3-h
    file against the default 3 h was refused; here 1 s and 7 s at the common rates)."""
    for seconds in (1, 7):
        samples = tone(seconds, rate)
        assert decode_file(pcm_wav(samples, rate), max_seconds=seconds).duration == pytest.approx(seconds, abs=1e-3)
        with pytest.raises(AudioTooLongError):
            decode_file(pcm_wav(np.concatenate([samples, samples[:, :1]], axis=1), rate), max_seconds=seconds)


def test_duration_limit_holds_when_the_header_understates_the_length():
    """A streamed WAV header (size 0xFFFFFFFF) promises nothing; decoding stops at the limit."""
    data = bytearray(pcm_wav(tone(10.0, 16000), 16000))
    data[40:44] = (0xFFFFFFFF).to_bytes(4, "little")
    with pytest.raises(AudioTooLongError, match="limit of 4 s"):
        decode_file(bytes(data), max_seconds=4)


def test_too_long_is_an_invalid_request():
    assert issubclass(AudioTooLongError, InvalidRequestError)


def test_a_few_samples_at_another_rate_are_refused_not_returned_empty():
    """Found by tests/test_fuzz.py: one sample at 48 kHz resamples to nothing."""
    for rate in (1000, 48000, 384000):
        with pytest.raises(InvalidRequestError, match="too short to resample"):
            decode_inputs({"array": [0.5], "sampling_rate": rate})


# --- decoder bombs (issue 22): nothing is produced before the rate and the length are checked -------


def test_a_file_declaring_a_few_hertz_is_refused_before_anything_is_resampled(monkeypatch):
    """20,000 samples declared at 2 Hz would resample to 2.8 hours (160 M samples) at 16 kHz."""
    from speaker_transcripts.pipeline import audio

    monkeypatch.setattr(audio, "_mono", lambda *_: pytest.fail("a frame of an implausible rate reached the resampler"))
    with pytest.raises(InvalidRequestError, match="sample rate of 2 Hz"):
        decode_file(pcm_wav(np.zeros(20_000), 2))  # no duration limit: the rate alone refuses it


def test_video_streams_are_not_decoded_to_find_the_audio(tmp_path):
    """Four 8000x8000 still images beside a second of audio (under 1 MB): opening the file used to
    decode each image (192 MB each; 1.7 GB and 8 s for four at 12000x12000); only the audio is decoded now."""
    import subprocess
    import sys

    path = tmp_path / "stills.nut"
    path.write_bytes(stills_beside_audio(8000, 4, tone(1.0, 16000)[0]))
    # VmHWM, the peak of this process's own memory (ru_maxrss would carry over the test process's peak through exec)
    measure = (
        "import re, sys; from speaker_transcripts.pipeline.audio import decode_file; data = open(sys.argv[1], 'rb').read();"
        "peak = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]);"
        "before = peak(); audio = decode_file(data); print(audio.duration, (peak() - before) // 1024)"
    )
    completed = subprocess.run([sys.executable, "-c", measure, str(path)], capture_output=True, text=True, check=True, timeout=120)
    duration, peak_mb = completed.stdout.split()
    assert float(duration) == pytest.approx(1.0, abs=0.01)
    assert int(peak_mb) < 100, f"decoding took {peak_mb} MB above what the process held"


def test_abandoned_requests_stop_decoding_at_the_next_frame():
    from speaker_transcripts.errors import RequestAbandoned

    asked = []
    with pytest.raises(RequestAbandoned):
        decode_file(pcm_wav(tone(20.0, 16000)[0]), should_stop=lambda: asked.append(1) or len(asked) > 3)
    assert len(asked) == 4


def test_the_sample_buffer_keeps_every_sample_in_order_whatever_size_it_was_given():
    from speaker_transcripts.pipeline.audio import SampleBuffer

    for capacity in (1, 2_500, 10_000, 1_000_000):
        buffer = SampleBuffer(capacity)
        for start in range(0, 10_000, 1_000):
            buffer.add(np.arange(start, start + 1_000, dtype=np.float32) / 32768)
        assert np.array_equal(buffer.samples(), np.arange(10_000, dtype=STORED)), capacity


def test_a_file_decodes_into_one_array_sized_from_its_header(monkeypatch):
    """A 3-h file decoded into a list of frames and joined held its samples twice (691 MB more at the
    peak): a file whose header gives its duration is written once into an array of that size."""
    from speaker_transcripts.pipeline import audio

    made: list[audio.SampleBuffer] = []

    class Watched(audio.SampleBuffer):
        def __init__(self, capacity: int) -> None:
            super().__init__(capacity)
            made.append(self)
            self.grown = 0

        def add(self, samples: np.ndarray) -> None:
            self.grown += self.size + len(samples) > len(self._data)
            super().add(samples)

    monkeypatch.setattr(audio, "SampleBuffer", Watched)
    for data in (encode(tone(30.0, 44100), 44100, "wav", "pcm_s16le"), encode(tone(30.0, 48000), 48000, "flac", "flac")):
        made.clear()
        samples = decode_file(data).samples
        assert len(samples) == pytest.approx(30 * SAMPLING_RATE, abs=SAMPLING_RATE // 100)
        assert [buffer.grown for buffer in made] == [0], "decoded into one array, never copied to grow it"



def test_a_16_bit_recording_is_held_exactly_in_half_the_memory():
    """16-bit (issue 50: a 3-h file's float32 samples were 691 MB of a 2.8-GiB peak); what a stage
    takes is, bit for bit, what the float32 decode gave before."""
    loud = tone(1.0, 16000)[0]
    for level in (1.0, 1e-3):
        held = decode_file(pcm_wav((loud * level)[None], 16000)).samples
        assert held.dtype == STORED and held.nbytes == 2 * SAMPLING_RATE
        np.testing.assert_array_equal(as_float32(held), (loud * level * 32767).astype("<i2") / np.float32(32768))
        assert as_float32(held).dtype == np.float32


def test_16_bit_samples_handed_back_in_are_kept_without_a_copy():
    """The CLI decodes the file, then hands the samples to the handler as an array: a float32 copy
    of a 3-h file would be 691 MB."""
    held = decode_file(pcm_wav(tone(2.0, 16000), 16000)).samples
    again = decode_inputs({"array": held, "sampling_rate": SAMPLING_RATE}).samples
    assert np.shares_memory(again, held)
    assert decode_inputs({"array": held[::2], "sampling_rate": 8000}).samples.dtype == STORED  # resampled through float32


def test_float_samples_past_full_scale_are_scaled_to_fit_and_a_files_are_clipped():
    """An array is scaled by its peak (16-bit values sent as floats keep their shape); a decoded file,
    frame by frame, is clipped at full scale as a 16-bit export of it would be."""
    samples = tone(1.0, 16000)[0] * 3000  # peak 1,500
    array = as_float32(from_array(samples, 16000).samples)
    np.testing.assert_allclose(array, samples / 1500, atol=2**-15)
    loud = tone(1.0, 16000)[0]
    loud[100] = 4.0
    held = as_float32(decode_file(float_wav(loud, 16000)).samples)
    assert held[100] == pytest.approx(1.0, abs=2**-15) and np.abs(held - np.clip(loud, -1, 1)).max() <= 2**-15


def test_16_bit_channels_are_averaged_at_their_level():
    held = decode_file(pcm_wav(tone(1.0, 16000), 16000)).samples
    both = decode_inputs(np.stack([held, held])).samples
    np.testing.assert_array_equal(both, held)


def test_audio_just_over_the_limit_says_by_how_much_not_the_limit_twice():
    """10800.04 s used to read "10800.0 s, longer than ... 10800 s"."""
    with pytest.raises(AudioTooLongError, match=r"lasts 4\.01 s, longer than this service's limit of 4 s"):
        decode_inputs({"array": np.zeros(4010, dtype=np.float32), "sampling_rate": 1000}, max_seconds=4)
