"""Turn whatever a client sent into 16 kHz mono samples, once per request.

Whisper and pyannote both want 16 kHz mono; decoding and resampling once here and handing the
same array to both keeps their timestamps on one clock whatever rate or container came in.
PyAV is used because its wheels bundle FFmpeg: every common container (wav, flac, mp3,
ogg/opus, m4a, webm) decodes after ``pip install`` alone, with libswresample doing the
resampling and channel down-mix.

The samples are held as 16-bit (``samples.py``): half of float32, and exact for a 16-bit recording.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from pathlib import Path
from typing import Any

import av
import numpy as np

from speaker_transcripts.errors import AudioTooLongError, InvalidRequestError, RequestAbandoned, shown
from speaker_transcripts.pipeline.samples import STORED, as_float32, stored

SAMPLING_RATE = 16000
# What a folder of recordings is searched for (the CLI's and the batch job's inputs, enrolment clip folders).
AUDIO_EXTENSIONS = frozenset({".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".mp4", ".aac", ".webm", ".wma", ".aiff", ".aif", ".mka"})
# Rates a real recording has. A header declaring 2 Hz turns each sample into 8000 at 16 kHz: a
# few dozen bytes would resample to hours of audio (gigabytes) before any limit is reached.
MIN_SAMPLING_RATE, MAX_SAMPLING_RATE = 1000, 384000
# Opening a container decodes a frame of every stream to learn its parameters (FFmpeg's
# find_stream_info), video included: a 2-MB file with four large still images cost 8 s and
# 1.7 GB before its audio was even chosen. Audio decoders ignore this limit; image decoders
# refuse at once, and video is never used here.
_OPEN_OPTIONS = {"max_pixels": "1"}
# A container whose header promises this much more than could be decoded was cut short.
TRUNCATION_TOLERANCE_S = 0.5
TRUNCATION_TOLERANCE_RATIO = 0.05
_DATA_URL = re.compile(r"^data:[\w/+.-]*(;[\w=.-]+)*;base64,", re.IGNORECASE)
_BASE64_ALPHABET = re.compile(rb"^[A-Za-z0-9+/=_\-\s]+$")


@dataclass(frozen=True)
class DecodedAudio:
    """Mono samples at ``SAMPLING_RATE`` Hz, held as 16-bit (``samples.STORED``); a model takes
    ``samples.as_float32`` of the stretch it works on."""

    samples: np.ndarray

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLING_RATE


def decode_inputs(
    inputs: Any,
    sampling_rate: int = SAMPLING_RATE,
    max_seconds: float | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> DecodedAudio:
    """Decode the ``inputs`` of a request.

    Accepted: a base64 string (optionally a ``data:audio/...;base64,`` URL), raw file bytes
    (what Inference Endpoints passes for an ``audio/*`` body), a ``{"array"|"raw": samples,
    "sampling_rate": rate}`` dict, or a bare array/list of samples at ``sampling_rate``.
    Audio longer than ``max_seconds`` raises ``AudioTooLongError`` before it is all decoded;
    ``should_stop`` saying yes (the request was abandoned) ends file decoding at the next frame.
    """
    if isinstance(inputs, str):
        return decode_file(_from_base64(inputs), max_seconds, should_stop)
    if isinstance(inputs, (bytes, bytearray, memoryview)):
        return decode_file(bytes(inputs), max_seconds, should_stop)
    if isinstance(inputs, Mapping):
        samples = inputs.get("array", inputs.get("raw"))
        if samples is None:
            raise InvalidRequestError("'inputs' as an object needs an 'array' (or 'raw') list of samples")
        return _within_limit(from_array(samples, inputs.get("sampling_rate", sampling_rate), max_seconds), max_seconds)
    if isinstance(inputs, (list, tuple, np.ndarray)):
        return _within_limit(from_array(inputs, sampling_rate, max_seconds), max_seconds)
    raise InvalidRequestError(
        f"'inputs' must be base64-encoded audio, raw audio bytes or an array of samples, not {type(inputs).__name__}"
    )


EMPTY_AUDIO = "the audio is empty (0 bytes)"


def decode_file(data: bytes, max_seconds: float | None = None, should_stop: Callable[[], bool] | None = None) -> DecodedAudio:
    """Decode an audio file in any container FFmpeg knows."""
    if not data:
        raise InvalidRequestError(EMPTY_AUDIO)
    try:
        return _decode_container(data, max_seconds, should_stop)
    except AudioTooLongError:
        raise
    except InvalidRequestError:
        if _BASE64_ALPHABET.match(data[:4096]):  # a base64 text body sent as raw bytes
            try:
                return _decode_container(_from_base64(data.decode("ascii")), max_seconds, should_stop)
            except AudioTooLongError:
                raise
            except (InvalidRequestError, UnicodeDecodeError):
                pass
        raise  # the first error: it describes the body as sent


def probe_file(path: Path) -> None:
    """Raise ``InvalidRequestError`` unless ``path`` opens as a container with an audio stream:
    a check of the header alone, so a command line can refuse a non-audio file before models load. Its
    messages are the server's for the same bytes (an empty file is "the audio is empty (0 bytes)")."""
    try:
        if path.stat().st_size == 0:
            raise InvalidRequestError(EMPTY_AUDIO)
        with av.open(str(path), options=_OPEN_OPTIONS) as container:
            if not container.streams.audio:
                raise InvalidRequestError("the file holds no audio stream; send an audio file (wav, flac, mp3, ogg, opus, m4a, webm)")
    except av.error.FFmpegError as error:
        raise InvalidRequestError(f"could not decode the audio ({_ffmpeg_reason(error)}); send a valid audio file") from None
    except OSError as error:
        raise InvalidRequestError(f"cannot read the file ({error.strerror})") from None


def _too_long(seconds: float, max_seconds: float) -> AudioTooLongError:
    digits = next(digits for digits in range(1, 7) if round(seconds, digits) > max_seconds or digits == 6)  # never "10800.0 > 10800"
    return AudioTooLongError(
        f"the audio lasts {seconds:.{digits}f} s, longer than this service's limit of {max_seconds:g} s (MAX_AUDIO_SECONDS); split it"
    )


def _within_limit(audio: DecodedAudio, max_seconds: float | None) -> DecodedAudio:
    if max_seconds is not None and audio.duration > max_seconds:
        raise _too_long(audio.duration, max_seconds)
    return audio


def from_array(samples: Any, sampling_rate: Any, max_seconds: float | None = None) -> DecodedAudio:
    """Accept already-decoded samples (mono, or channels-first) and bring them to 16 kHz mono.

    The duration limit is checked on the sample count and rate, before resampling: 2.4 M samples
    at 1 kHz are 40 min at 16 kHz, and resampling them first cost 1 GB only to refuse them.
    """
    if not isinstance(sampling_rate, int) or isinstance(sampling_rate, bool) or not _plausible_rate(sampling_rate):
        raise InvalidRequestError(
            f"sampling_rate must be an integer between {MIN_SAMPLING_RATE} and {MAX_SAMPLING_RATE} Hz, got {shown(sampling_rate)}"
        )
    try:
        # A 16-bit array is PCM (a decoded file handed back in, as the CLI does) and is kept: a float32 copy of 3 h is 691 MB.
        array = samples if isinstance(samples, np.ndarray) and samples.dtype == STORED else np.asarray(samples, dtype=np.float32)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer too large for any float
        raise InvalidRequestError("the audio array must contain only numbers (within float range)") from None
    if array.ndim == 2:
        array = as_float32(array).mean(axis=0 if array.shape[0] <= array.shape[1] else 1)
    if array.ndim != 1:
        raise InvalidRequestError(f"the audio array must be 1-D (or channels x samples), got shape {array.shape}")
    if array.size == 0:
        raise InvalidRequestError("the audio array is empty")
    if max_seconds is not None and array.size / sampling_rate > max_seconds:
        raise _too_long(array.size / sampling_rate, max_seconds)
    if not np.isfinite(array).all():
        raise InvalidRequestError("the audio array contains NaN or infinite values")
    if array.dtype != STORED and (peak := float(np.abs(array).max())) > 1.0:
        array = array / peak  # not full-scale floats (16-bit values sent as floats, a mix past 1.0): scaled, not clipped to 16 bits
    if sampling_rate != SAMPLING_RATE:
        array = _resample(as_float32(array), sampling_rate)
        if array.size == 0:
            raise InvalidRequestError(f"the audio array is too short to resample from {sampling_rate} Hz (send at least a few ms)")
    return DecodedAudio(stored(array))


def _from_base64(text: str) -> bytes:
    payload = _DATA_URL.sub("", text.strip(), count=1)
    payload = re.sub(r"\s+", "", payload)
    if not payload:
        raise InvalidRequestError("'inputs' is an empty string; send base64-encoded audio")
    padded = payload + "=" * (-len(payload) % 4)
    try:
        alphabet = "-_" if ("-" in payload or "_" in payload) else None
        return base64.b64decode(padded, altchars=alphabet.encode() if alphabet else None, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(
            "'inputs' is not valid base64; encode the audio file's bytes with base64 (e.g. base64.b64encode(open(f, 'rb').read()).decode())"
        ) from None


def _plausible_rate(rate: int) -> bool:
    return MIN_SAMPLING_RATE <= rate <= MAX_SAMPLING_RATE


def _implausible_rate(rate: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"the audio declares a sample rate of {rate} Hz; real recordings use {MIN_SAMPLING_RATE}-{MAX_SAMPLING_RATE} Hz "
        "(is the file damaged?)"
    )


def _decode_container(data: bytes, max_seconds: float | None = None, should_stop: Callable[[], bool] | None = None) -> DecodedAudio:
    _check_wav_complete(data)
    try:
        with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore", options=_OPEN_OPTIONS) as container:
            stream = next((s for s in container.streams if s.type == "audio"), None)
            if stream is None:
                raise InvalidRequestError("the file holds no audio stream; send an audio file (wav, flac, mp3, ogg, opus, m4a, webm)")
            if not _plausible_rate(stream.sample_rate or 0):
                raise _implausible_rate(stream.sample_rate or 0)
            declared = _declared_duration(container, stream)
            if max_seconds is not None and declared is not None and declared > max_seconds:
                raise _too_long(declared, max_seconds)
            expected = None if declared is None else int(declared * SAMPLING_RATE) + SAMPLING_RATE  # + the resampler's tail
            samples = _resampled(container.decode(stream), max_seconds, should_stop, expected)
    except av.error.FFmpegError as error:
        raise InvalidRequestError(f"could not decode the audio ({_ffmpeg_reason(error)}); send a valid audio file") from None
    if samples.size == 0:
        raise InvalidRequestError("the file holds no audio samples (is it empty or cut short?)")
    decoded = len(samples) / SAMPLING_RATE
    if declared is not None and declared - decoded > max(TRUNCATION_TOLERANCE_S, TRUNCATION_TOLERANCE_RATIO * declared):
        raise InvalidRequestError(
            f"the audio is truncated: its header promises {declared:.1f} s but only {decoded:.1f} s could be decoded"
        )
    return DecodedAudio(samples)


def _resampled(
    frames: Iterable[av.AudioFrame | None],
    max_seconds: float | None = None,
    should_stop: Callable[[], bool] | None = None,
    expected: int | None = None,
) -> np.ndarray:
    """16 kHz mono 16-bit samples from frames of any rate and layout (libswresample, flushed at the
    end), written into one array sized for ``expected`` samples (``SampleBuffer``).

    Each frame's rate and length are checked *before* it is resampled: a header can understate
    the length or change the rate mid-stream, and one frame at a few Hz would resample to hours,
    so the audio is refused as soon as its source samples pass ``max_seconds``, and again on the
    output side. ``should_stop`` is asked at every frame.
    """
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLING_RATE)
    limit = None if max_seconds is None else int(max_seconds * SAMPLING_RATE)
    # Exact: frame durations summed as floats passed the limit on files exactly as long as it (3 h at 16 kHz refused).
    decoded, source_seconds = SampleBuffer(expected or SAMPLING_RATE), Fraction(0)
    for frame in chain(frames, [None]):
        if frame is not None:
            if should_stop is not None and should_stop():
                raise RequestAbandoned("the request was abandoned while its audio was decoded")
            if not _plausible_rate(frame.sample_rate):
                raise _implausible_rate(frame.sample_rate)
            source_seconds += Fraction(frame.samples, frame.sample_rate)
            if max_seconds is not None and source_seconds > max_seconds:
                raise _too_long(float(source_seconds), max_seconds)
        for out in resampler.resample(_mono(frame) if frame is not None else None):
            decoded.add(out.to_ndarray().reshape(-1))
            if limit is not None and decoded.size > limit:
                raise _too_long(decoded.size / SAMPLING_RATE, max_seconds)
    return decoded.samples()


class SampleBuffer:
    """Samples appended into one 16-bit array (``samples.STORED``), sized up front and grown by a
    quarter when full; each piece is checked finite as it comes (one NaN turns Whisper's features to NaN:
    "!!!!" at 10x the time).

    Decoded into a list of frames and joined at the end, a 3-h file held its 691 MB of (then
    float32) samples twice at the peak. Sized from the header's duration, the array is written
    once; memory the header promised and the file never filled is never touched (``np.empty``
    pages are not resident until written), so an overstated header costs no memory."""

    def __init__(self, capacity: int) -> None:
        self._data = np.empty(max(capacity, 1), dtype=STORED)
        self.size = 0

    def add(self, samples: np.ndarray) -> None:
        if not np.isfinite(samples).all():
            raise InvalidRequestError("the audio contains NaN or infinite sample values; send finite samples")
        end = self.size + len(samples)
        if end > len(self._data):
            grown = np.empty(max(end, len(self._data) + len(self._data) // 4), dtype=STORED)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : end] = stored(samples)
        self.size = end

    def samples(self) -> np.ndarray:
        return self._data[: self.size]


_FULL_SCALE = {np.dtype(np.uint8): 128.0, np.dtype(np.int16): 2.0**15, np.dtype(np.int32): 2.0**31, np.dtype(np.int64): 2.0**63}


def _mono(frame: av.AudioFrame) -> av.AudioFrame:
    """Several channels averaged with equal weights, as a mono float frame.

    libswresample refuses layouts it has no downmix matrix for (9, 32 or 64 channels failed with
    "Invalid argument") and weights the ones it knows unequally (an 8-channel sine came out at
    1.08 of full scale: clipped). Every channel counts the same here, whatever the count.
    """
    if len(frame.layout.channels) == 1:
        return frame
    channels = len(frame.layout.channels)
    data = frame.to_ndarray()
    data = data if frame.format.is_planar else data.reshape(-1, channels).T
    scale = _FULL_SCALE.get(data.dtype)
    mono = np.zeros(data.shape[1], dtype=np.float32)  # summed channel by channel in float32: a float64 copy of
    for channel in data:  # every byte of 64-channel 8-bit PCM took 8x the upload
        mono += channel.astype(np.float32)
    mono /= channels
    if data.dtype == np.uint8:
        mono -= 128.0
    mono /= scale or 1.0
    downmixed = av.AudioFrame.from_ndarray(mono.reshape(1, -1), format="flt", layout="mono")
    downmixed.sample_rate = frame.sample_rate
    return downmixed


def _resample(array: np.ndarray, sampling_rate: int) -> np.ndarray:
    """Resample with the same libswresample the file path uses, so both paths agree."""
    frame = av.AudioFrame.from_ndarray(array.reshape(1, -1), format="flt", layout="mono")
    frame.sample_rate = sampling_rate
    return _resampled([frame])


def _check_wav_complete(data: bytes) -> None:
    """FFmpeg reads a cut-off WAV without complaint; its RIFF header says how much should follow."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return
    offset = 12
    while offset + 8 <= len(data):
        chunk_id, size = data[offset : offset + 4], int.from_bytes(data[offset + 4 : offset + 8], "little")
        if chunk_id == b"data":
            present = len(data) - offset - 8
            if size not in (0, 0xFFFFFFFF) and size > present:  # 0 and ~0 mean "streamed, size unknown"
                raise InvalidRequestError(
                    f"the WAV file is truncated: its header declares {size} bytes of audio but only {present} are present"
                )
            return
        offset += 8 + size + (size & 1)


def _declared_duration(container: av.container.InputContainer, stream: av.AudioStream) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / av.time_base
    return None


def _ffmpeg_reason(error: av.error.FFmpegError) -> str:
    reason = getattr(error, "strerror", None) or str(error)
    return reason.split(":")[0].strip() if reason else "unrecognised format"


class PcmStream:
    """Raw 16-bit little-endian mono PCM at ``rate`` Hz, arriving in pieces (a live session), as
    16 kHz float32: libswresample (the file path's resampler) keeps its filter state between
    pieces, so a stream cut anywhere resamples as one piece would."""

    def __init__(self, rate: int) -> None:
        if not _plausible_rate(rate):
            raise _implausible_rate(rate)
        self.rate = rate
        self._resampler = None if rate == SAMPLING_RATE else av.AudioResampler(format="flt", layout="mono", rate=SAMPLING_RATE)
        self._pts = 0

    def __call__(self, pcm: bytes) -> np.ndarray:
        if len(pcm) % 2:
            raise InvalidRequestError(f"16-bit PCM comes in whole 2-byte samples; got {len(pcm)} bytes")
        samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 2.0**15
        if self._resampler is None or samples.size == 0:
            return samples
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate, frame.pts = self.rate, self._pts
        self._pts += samples.size
        out = [piece.to_ndarray().reshape(-1) for piece in self._resampler.resample(frame)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
