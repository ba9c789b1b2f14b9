"""The same live session over a WebRTC call and over the WebSocket, from Chromium with a fake microphone.

    python bench/live_webrtc.py [--manifest ../shared/dev-audio/manifest.json] [--conversations conv01 conv03] \
        [--repeats 3] [--out bench-results/live-webrtc.json]

The server (the default models, one live slot, media on loopback) runs in this process; for each dev
conversation Chromium plays the recording as its microphone (``%noloop``, 10 s of quiet after it) into a
call (``POST /v1/realtime/calls``, the Opus track) and then into the WebSocket (base64 PCM at 16 kHz,
the page's worklet), the link opened before the microphone so both hear the recording from its start.
Reported per route: word latency p50/p90 (a delta's sending minus its word's end on the session clock,
whose zero is the first audio's arrival less its 100-ms chunk: the uplink's own constant delay, Opus
framing and aiortc's jitter buffer on a call, is not in it), the final WER, the upstream bytes a second
(WebSocket frames' text; a call's whole DTLS transport from Chromium's getStats) and this process's CPU
seconds per second of audio (the server: models, transport, Opus decoding). With ``--repeats N`` each
conversation runs N times, the routes' order swapped each time (the second route of a pair hears a
machine the first has warmed), and every word of every repeat is pooled per route in ``pooled``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TAIL_S = 10.0  # quiet after the recording: the last turn's final text comes within it
CHROMIUM = "/usr/bin/chromium"

HARNESS = """async ({ mode, seconds }) => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const constraints = { audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } };
  const transcription = { model: "whisper-1", language: "en" };
  let bytesUp = 0;
  if (mode === "webrtc") {
    const peer = new RTCPeerConnection();
    const transceiver = peer.addTransceiver("audio", { direction: "sendonly" });
    const channel = peer.createDataChannel("oai-events");
    await peer.setLocalDescription(await peer.createOffer());
    const answer = await fetch("/v1/realtime/calls", { method: "POST", body: peer.localDescription.sdp, headers: { "Content-Type": "application/sdp" } });
    if (answer.status !== 201) throw new Error(await answer.text());
    await peer.setRemoteDescription({ type: "answer", sdp: await answer.text() });
    await new Promise((resolve) => { channel.onopen = resolve; });
    channel.send(JSON.stringify({ type: "session.update", session: { type: "transcription", audio: { input: { transcription } } } }));
    const stream = await navigator.mediaDevices.getUserMedia(constraints);
    await transceiver.sender.replaceTrack(stream.getAudioTracks()[0]);
    await sleep(seconds * 1000);
    channel.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
    await sleep(3000);
    (await peer.getStats()).forEach((report) => { if (report.type === "transport") bytesUp += report.bytesSent; });
    peer.close();
  } else {
    const socket = new WebSocket(location.origin.replace("http", "ws") + "/v1/realtime?intent=transcription", ["realtime"]);
    await new Promise((resolve) => { socket.onopen = resolve; });
    socket.send(JSON.stringify({ type: "session.update", session: { type: "transcription", audio: { input: { format: { type: "audio/pcm", rate: 16000 }, transcription } } } }));
    const stream = await navigator.mediaDevices.getUserMedia(constraints);
    const context = new AudioContext({ sampleRate: 16000 });
    await context.audioWorklet.addModule("/static/pcm-worklet.js");
    const capture = new AudioWorkletNode(context, "pcm16-capture");
    capture.port.onmessage = (event) => {
      let binary = "";
      const bytes = new Uint8Array(event.data);
      for (let index = 0; index < bytes.length; index += 0x8000) binary += String.fromCharCode(...bytes.subarray(index, index + 0x8000));
      const frame = JSON.stringify({ type: "input_audio_buffer.append", audio: btoa(binary) });
      bytesUp += frame.length;
      socket.send(frame);
    };
    context.createMediaStreamSource(stream).connect(capture);
    await sleep(seconds * 1000);
    socket.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
    await sleep(3000);
    socket.close();
    context.close();
  }
  return { bytesUp };
}"""


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", type=Path, default=ROOT.parent / "shared" / "dev-audio" / "manifest.json")
    parser.add_argument("--conversations", nargs="+", default=["conv01", "conv03"], help="manifest entries whose name starts so")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "live-webrtc.json")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each conversation, the routes' order swapped each time")
    parser.add_argument("--keep-audio", action="store_true", help="save the audio the server received, per route, beside --out")
    return parser.parse_args(argv)


class Recorder:
    """What the server's session sent, on its clock: word latencies and final texts (one session at a time)."""

    def __init__(self) -> None:
        self.first_audio: float | None = None
        self.latencies: list[float] = []
        self.completed: list[str] = []
        self.received: list[bytes] = []  # the session's audio as it arrived (16 kHz both ways here): --keep-audio

    def install(self) -> None:
        from speaker_transcripts.live.events import TranscriptCompleted, TranscriptDelta
        from speaker_transcripts.server.routers import realtime

        original_event, original_append = realtime.server_event, realtime.Connection._append

        def server_event(event: Any) -> dict[str, Any]:
            now = time.monotonic()
            if isinstance(event, TranscriptDelta) and self.first_audio is not None:
                self.latencies.extend(now - (self.first_audio + end) for end in event.ends)
            elif isinstance(event, TranscriptCompleted):
                self.completed.append(event.transcript)
            return original_event(event)

        async def append(connection: Any, pcm: bytes, client_event_id: str | None) -> bool:
            if self.first_audio is None and pcm:  # the first chunk's first sample: its duration before it arrived
                self.first_audio = time.monotonic() - len(pcm) / 2 / (connection.transport.media_rate or connection.read_rate)
            self.received.append(pcm)
            return await original_append(connection, pcm, client_event_id)

        realtime.server_event = server_event
        realtime.Connection._append = append

    def reset(self) -> None:
        self.first_audio, self.latencies, self.completed, self.received = None, [], [], []


def runs(repeats: int) -> list[tuple[int, str]]:
    """Each repeat's two routes, the first one swapped every other repeat."""
    return [(repeat, mode) for repeat in range(repeats) for mode in (("webrtc", "websocket"), ("websocket", "webrtc"))[repeat % 2]]


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    """The word count and the p50 / p90 latency of ``values``."""
    ordered = sorted(values)
    return {"words": len(ordered), "latency_p50_s": round(statistics.median(ordered), 2) if ordered else None,
            "latency_p90_s": round(ordered[int(0.9 * (len(ordered) - 1))], 2) if ordered else None}


def serve(settings: Any) -> tuple[Any, str]:
    """The app under Uvicorn in a thread, as ``speaker-transcripts serve`` runs it; its URL."""
    from speaker_transcripts.server.app import create_app
    from speaker_transcripts.server.connection_guard import GuardedServer, guarded_config

    app = create_app(None, settings)
    server = GuardedServer(guarded_config(app, settings, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return app, f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


def microphone(samples: Any, folder: Path, name: str) -> Path:
    """The recording and ``TAIL_S`` of quiet as a 16-bit WAV for Chromium's fake microphone."""
    import av
    import numpy as np

    path = folder / f"{name}.wav"
    samples = np.concatenate([samples, np.zeros(int(16000 * TAIL_S), dtype=np.float32)])
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=16000, layout="mono")
        frame = av.AudioFrame.from_ndarray((samples * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = 16000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return path


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if not arguments.manifest.is_file():
        print(f"no manifest at {arguments.manifest}: this benchmark needs ../shared/dev-audio", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from speaker_transcripts.config import ServerSettings
    from speaker_transcripts.evaluation.scoring import english_normaliser, load_manifest, word_errors, words_of
    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    entries = [entry for entry in load_manifest(arguments.manifest) if entry.name.startswith(tuple(arguments.conversations))]
    settings = ServerSettings(webrtc_hosts="127.0.0.1", live_max_sessions=1)
    app, url = serve(settings)
    recorder = Recorder()
    recorder.install()
    normalise = english_normaliser()
    rows: list[dict[str, Any]] = []
    pooled: dict[str, list[float]] = {}  # every word's latency, per route, over conversations and repeats
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--use-fake-ui-for-media-stream",
             "--use-fake-device-for-media-stream", "--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns"]
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        for entry in entries:
            samples = as_float32(decode_file(entry.audio.read_bytes()).samples)
            wav = microphone(samples, Path(folder), entry.name)
            seconds = len(samples) / 16000 + TAIL_S
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=[*flags, f"--use-file-for-fake-audio-capture={wav}%noloop"])
            for repeat, mode in runs(arguments.repeats):
                page = browser.new_page()
                page.goto(url + "/health")
                recorder.reset()
                cpu = resource.getrusage(resource.RUSAGE_SELF)
                result = page.evaluate(HARNESS, {"mode": mode, "seconds": seconds})
                used = resource.getrusage(resource.RUSAGE_SELF)
                page.close()
                errors = word_errors(words_of(entry.text, normalise), words_of(" ".join(recorder.completed), normalise))
                pooled.setdefault(mode, []).extend(recorder.latencies)
                rows.append({
                    "conversation": entry.name, "route": mode, "repeat": repeat, "audio_s": round(seconds, 1),
                    **percentiles(recorder.latencies),
                    "wer": round(errors.rate, 4), "upstream_kbit_s": round(result["bytesUp"] * 8 / 1000 / seconds, 1),
                    "server_cpu_s_per_audio_s": round((used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime) / seconds, 3),
                })
                print(json.dumps(rows[-1]), flush=True)
                if arguments.keep_audio:
                    arguments.out.parent.mkdir(parents=True, exist_ok=True)
                    (arguments.out.parent / f"{Path(entry.name).stem}-{mode}-{repeat}.pcm").write_bytes(b"".join(recorder.received))
            browser.close()
    with open("/proc/loadavg") as loadavg:
        report = {"rows": rows, "loadavg_after": loadavg.read().split()[:3], "asr_model": app.state.handler.configured.asr_model,
                  "pooled": {mode: percentiles(values) for mode, values in pooled.items()}}
    print(json.dumps({"pooled": report["pooled"]}))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {arguments.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
