"""Audio files for tests and the probe: WAV written without the decoder under test (PCM16 through
the standard library, IEEE float by hand: the only common format that can carry NaN), a WAV
whose header gives no length, still images beside a second of audio, and audio through a codec
(the last two through PyAV's encoders)."""

from __future__ import annotations

import io
import wave

import numpy as np

from speaker_transcripts.pipeline.samples import as_float32


def pcm_wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    """PCM16 WAV; ``samples`` is (n,) or (channels, n), floats in [-1, 1] (clipped) or 16-bit (a decoded request's)."""
    frames = np.atleast_2d(as_float32(np.asarray(samples)))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(frames.shape[0])
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes((np.clip(frames.T, -1, 1) * 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def float_wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    """Mono IEEE-float WAV (format 3)."""
    data = np.asarray(samples).astype("<f4").tobytes()
    header = b"fmt " + (16).to_bytes(4, "little") + (3).to_bytes(2, "little") + (1).to_bytes(2, "little")
    header += rate.to_bytes(4, "little") + (rate * 4).to_bytes(4, "little") + (4).to_bytes(2, "little") + (32).to_bytes(2, "little")
    body = b"WAVE" + header + b"data" + len(data).to_bytes(4, "little") + data
    return b"RIFF" + len(body).to_bytes(4, "little") + body


def streamed_wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    """A WAV whose header gives no length (as a live stream writes it): only decoding tells how long it is."""
    wav = bytearray(pcm_wav(samples, rate))
    wav[4:8] = wav[40:44] = b"\xff\xff\xff\xff"
    return bytes(wav)


def stills_beside_audio(size: int, count: int, samples: np.ndarray) -> bytes:
    """A NUT file: ``count`` black ``size`` x ``size`` PNG video streams and 16-kHz ``samples`` (floats in [-1, 1])."""
    import av

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="nut") as output:
        sound = output.add_stream("pcm_s16le", rate=16000, layout="mono")
        stills = [output.add_stream("png", rate=1) for _ in range(count)]
        for still in stills:  # every stream is set up before the first packet opens them all
            still.width = still.height = size
            still.pix_fmt = "rgb24"
        for still in stills:
            frame = av.VideoFrame.from_ndarray(np.zeros((size, size, 3), np.uint8), format="rgb24")
            for packet in [*still.encode(frame), *still.encode(None)]:
                output.mux(packet)
        audio = av.AudioFrame.from_ndarray((np.clip(samples, -1, 1)[None, :] * 30000).astype(np.int16), format="s16", layout="mono")
        audio.sample_rate = 16000
        for packet in [*sound.encode(audio), *sound.encode(None)]:
            output.mux(packet)
    return buffer.getvalue()


def through_codec(samples: np.ndarray, codec: str, container: str, rate: int, bit_rate: int | None = None) -> bytes:
    """16-kHz ``samples`` (floats in [-1, 1]) encoded by FFmpeg's ``codec`` at ``rate`` into ``container``,
    as a call recording (G.711 ``pcm_mulaw``/``wav``, AMR-NB, low-rate Opus) reaches the service."""
    import av

    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as output:
        stream = output.add_stream(codec, rate=rate, layout="mono")
        if bit_rate:
            stream.bit_rate = bit_rate
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=rate)
        frame = av.AudioFrame.from_ndarray((np.clip(samples, -1, 1) * 32767).astype(np.int16)[None], format="s16", layout="mono")
        frame.sample_rate = 16000
        for converted in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(converted):
                output.mux(packet)
        for packet in stream.encode(None):
            output.mux(packet)
    return buffer.getvalue()
