// The microphone: Record streams it to a live session (OpenAI's Realtime protocol, over a WebRTC call or
// the WebSocket: realtime-link.js) and shows words and speakers as they become final.

import { $, clock, concatenate, say, session, showError, state, wavBlob } from "./common.js";
import { apiKey } from "./auth.js";
import { openLink } from "./realtime-link.js";
import { attributeWords, render, resetResult, speakerLabels } from "./view.js";
import { setAudio } from "./player.js";
import { chosenVoices } from "./voices.js";

const LIVE_RATE = 16000;
// --- the microphone: the live session ---------------------------------------------------------

$("record").addEventListener("click", () => {
  if (session.live) session.live.stop();
  else startLive().catch((error) => { showError(error.message); session.live = null; setRecording(false); });
});

function setRecording(on) {
  $("record").setAttribute("aria-pressed", on ? "true" : "false");
  $("record").textContent = on ? "Stop" : "Record";
  $("result").classList.toggle("recording", on);  // no player, downloads or correction hints until there is a recording
}

// Browsers give the microphone only to secure pages: https://, or http://localhost. Opened from another
// machine over plain http, getUserMedia does not even exist, which used to read "No microphone was found".
const INSECURE_ORIGIN = !window.isSecureContext;
if (INSECURE_ORIGIN) {
  $("record").disabled = true;
  $("record").title = "Record needs this page over https:// (or at localhost)";
  $("record-note").hidden = false;
  $("record-note").textContent = `Record is unavailable: browsers give the microphone only to pages served over https:// or from localhost, and this one is ${location.origin}. `
    + "Serve it with speaker-transcripts serve --ssl-certfile cert.pem --ssl-keyfile key.pem (or behind a TLS proxy) and open https://"
    + `${location.host}/ instead. Files can be transcribed here as they are.`;
}

// While recording: how long, and how loud the microphone is (a meter that stays still says the
// microphone hears nothing, before any word could come back).
function showInput(pcm, seconds) {
  let energy = 0;
  for (const sample of pcm) energy += sample * sample;
  const rms = Math.sqrt(energy / Math.max(pcm.length, 1)) / 32768;
  const decibels = 20 * Math.log10(rms || 1e-6); // -60 dBFS (silence) .. 0 dBFS (full scale)
  $("record-input").hidden = false;
  $("record-level").value = Math.min(Math.max((decibels + 60) / 60, 0), 1);
  $("record-clock").textContent = clock(seconds);
}

async function startLive() {
  if (session.authRequired && !apiKey()) throw new Error("This server needs an API key: enter it above first.");
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } });
  } catch (error) {
    if (error.name === "NotAllowedError" || error.name === "SecurityError") {
      throw new Error("The browser did not allow the microphone. Allow it for this page (the icon in the address bar) and press Record again.");
    }
    throw new Error("No microphone was found. Connect one, or choose a file instead.");
  }
  resetResult("live recording");
  $("result").hidden = false;
  showError("");
  document.querySelector("details.options").open = false;  // the live words on the first screen, not below the options
  const context = new AudioContext({ sampleRate: LIVE_RATE });
  await context.audioWorklet.addModule("static/pcm-worklet.js");
  const source = context.createMediaStreamSource(stream);
  const capture = new AudioWorkletNode(context, "pcm16-capture");
  const recorded = [];
  let link = null;
  let open = false;
  let stopping = false;
  // Stop sends a commit; the session ends once that commit was answered (its turn committed, or nothing
  // left to commit) and every committed turn's final text came: a turn's final text may come seconds after
  // it was committed (the server's LIVE_LOOKAHEAD_S), after the next turn's.
  let commitAnswered = false;
  const unfinished = new Set(); // turns committed, their final text not come yet
  const serverStopped = new Set(); // turns the server's turn detection ended, not Stop's commit
  function closeWhenDone() {
    if (stopping && commitAnswered && unfinished.size === 0) link.close();
  }
  const tentative = new Map(); // item -> words final but not yet with a speaker

  let heard = 0; // samples captured: the elapsed time shown beside Record
  capture.port.onmessage = (event) => {
    const pcm = new Int16Array(event.data);
    recorded.push(pcm);
    heard += pcm.length;
    showInput(pcm, heard / LIVE_RATE);
    if (open && link.sendsAudio) link.send({ type: "input_audio_buffer.append", audio: base64(event.data) });
  };
  function opened(opening) {
    link = opening;
    // over a call the audio comes in the track (Opus, the server resamples it): no format to set
    const input = link.sendsAudio ? { format: { type: "audio/pcm", rate: LIVE_RATE }, transcription: liveTranscription() } : { transcription: liveTranscription() };
    link.send({ type: "session.update", session: { type: "transcription", audio: { input } } });
    open = true;
    source.connect(capture);
    setRecording(true);
    say(`Listening (${link.kind}): words appear as they become final.`);
  }
  function handle(event) {
    switch (event.type) {
      case "conversation.item.input_audio_transcription.delta":
        tentative.set(event.item_id, (tentative.get(event.item_id) || "") + event.delta);
        $("live-tail").textContent = [...tentative.values()].join(" ");
        break;
      case "conversation.item.input_audio_transcription.segment":
        addLiveSegment(event);
        tentative.set(event.item_id, (tentative.get(event.item_id) || "").replace(event.text.trim(), "").trim());
        $("live-tail").textContent = [...tentative.values()].filter(Boolean).join(" ");
        break;
      case "conversation.item.input_audio_transcription.completed":
        if (!state.segments.some((segment) => segment.item === event.item_id) && event.transcript.trim()) {
          addLiveSegment({ item_id: event.item_id, speaker: "", text: event.transcript, start: lastTurnStart(event.item_id), end: state.duration });
        }
        tentative.delete(event.item_id);
        $("live-tail").textContent = [...tentative.values()].filter(Boolean).join(" ");
        unfinished.delete(event.item_id);
        closeWhenDone();
        break;
      case "input_audio_buffer.speech_stopped":
        serverStopped.add(event.item_id);
        break;
      case "input_audio_buffer.committed":
        unfinished.add(event.item_id);
        if (stopping && !serverStopped.has(event.item_id)) commitAnswered = true;
        break;
      case "input_audio_buffer.speech_started":
        turnStarts.set(event.item_id, event.audio_start_ms / 1000);
        break;
      case "session.backlog":  // the server fell behind (a busy machine), or caught up
        say(event.behind
          ? `Listening, but the server is ${Math.round(event.seconds)} s behind: words come late until it catches up.`
          : "Listening: the server has caught up.");
        break;
      case "error":
        if (stopping && event.error?.code === "invalid_value") { commitAnswered = true; closeWhenDone(); break; }  // nothing left to commit
        if (event.error?.code === "server_busy") showError(`The server is at capacity for live sessions; try again later. (${event.error.message})`);
        else showError(event.error?.message || "The live session reported an error.");
        break;
      default:
        break;
    }
  }
  const turnStarts = new Map();
  function lastTurnStart(item) { return turnStarts.get(item) ?? 0; }

  function finish() {
    if (!session.live) return;
    session.live = null;
    $("record-input").hidden = true;
    source.disconnect();
    stream.getTracks().forEach((track) => track.stop());
    context.close();
    setRecording(false);
    const samples = concatenate(recorded);
    state.duration = samples.length / LIVE_RATE;
    setAudio(wavBlob(samples, LIVE_RATE));
    attributeWords();
    render();
    $("live-tail").textContent = "";
    say(`Stopped: ${state.words.length} words, ${speakerLabels().length} speakers. Listen, rename and download below.`);
    $("result").scrollIntoView({ block: "start" }); // as after an upload: the transcript on the first screen
  }

  session.live = {
    stop() {
      stopping = true;
      source.disconnect();
      say("Finishing the last words…");
      if (open) link.send({ type: "input_audio_buffer.commit" });
      else finish();
    },
  };
  try {
    link = await openLink(stream, {
      open: opened, event: handle, close: finish,
      refused: (message) => { showError(message); finish(); },
    });
  } catch (error) {
    finish();
    throw error;
  }
}

function liveTranscription() {
  const transcription = { model: "whisper-1" };
  const language = $("language").value.trim();
  if (language) transcription.language = language;
  const voices = chosenVoices();
  if (voices) transcription.voices = voices;
  return transcription;
}

function addLiveSegment(event) {
  const segment = { speaker: event.speaker, text: event.text.trim(), start: event.start, end: event.end, item: event.item_id };
  state.segments.push(segment);
  const words = segment.text.split(/\s+/).filter(Boolean);
  const span = Math.max(segment.end - segment.start, 0.01);
  words.forEach((text, index) => {
    state.words.push({
      text: ` ${text}`, start: segment.start + (span * index) / words.length, end: segment.start + (span * (index + 1)) / words.length,
      speaker: segment.speaker,
    });
  });
  if (segment.speaker) extendTimeline(segment);
  state.duration = Math.max(state.duration, segment.end);
  render();
}

function extendTimeline(segment) {
  const last = state.timeline.findLast((turn) => turn.speaker === segment.speaker);
  if (last && segment.start - last.end < 0.5) last.end = Math.max(last.end, segment.end);
  else state.timeline.push({ speaker: segment.speaker, start: segment.start, end: segment.end });
}

function base64(buffer) {
  let binary = "";
  const bytes = new Uint8Array(buffer);
  for (let index = 0; index < bytes.length; index += 0x8000) binary += String.fromCharCode(...bytes.subarray(index, index + 0x8000));
  return btoa(binary);
}
