// The page: a recording in (a file, or the microphone), who said what out, to listen through,
// correct and take away. It talks to the server's own routes: POST /v1/audio/transcriptions with
// stream=true for a file (text as pieces finish, then the speakers), and the live WebSocket
// (GET /v1/realtime, OpenAI's Realtime protocol) for the microphone. No dependencies, no build.

import { History, editTurn, mergeSpeakers, moveTurn, newSpeakerLabel } from "./corrections.js";
import { exportAs } from "./exports.js";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "speaker-transcripts-api-key";
const COLOURS = ["#2456c6", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#be185d", "#4d7c0f", "#475569"];
const LIVE_RATE = 16000;

const state = {
  words: [],        // {text, start, end, speaker}
  segments: [],     // {speaker, text, start, end}
  timeline: [],     // {speaker, start, end}: who spoke when, overlaps kept
  names: {},        // label -> the name shown (renamed by the user)
  duration: 0,
  source: "recording",
};
let authRequired = false;
let limits = {}; // the server's MAX_UPLOAD_MB and MAX_AUDIO_SECONDS (GET /ready): a file over them is not sent
let liveSession = null;
const history = new History(); // the corrections made to this result, to undo

// --- errors people understand ------------------------------------------------------------------

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
  if (message) say("");  // what was under way ("Uploading…") has stopped: the error is the news
}

function say(message) {
  $("status").textContent = message;
}

function explainStatus(status, serverMessage) {
  if (status === 401) return "The API key is missing or wrong. Enter this server's key above and try again.";
  if (status === 413) return `The recording is too big or too long for this server: ${serverMessage}`;
  if (status === 503) return `The server is busy right now; try again in a moment. (${serverMessage})`;
  if (status === 400 || status === 422) return `The server could not use this request: ${serverMessage}`;
  return `Something went wrong on the server (HTTP ${status}). ${serverMessage || ""}`.trim();
}

// --- the API key ------------------------------------------------------------------------------

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

function authHeaders() {
  return apiKey() ? { Authorization: `Bearer ${apiKey()}` } : {};
}

async function checkAuth() {
  try {
    const ready = await (await fetch("ready")).json();
    authRequired = Boolean(ready.auth);
    limits = ready.limits || {};
  } catch {
    authRequired = false;
  }
  $("key-panel").hidden = !authRequired;
  if (authRequired && !apiKey()) say("This server needs an API key: enter it above.");
}

$("key-save").addEventListener("click", async () => {
  const key = $("api-key").value.trim();
  if (!key) return;
  const answer = await fetch("v1/models", { headers: { Authorization: `Bearer ${key}` } });
  if (answer.status === 401) {
    showError("That API key is wrong: the server refused it.");
    return;
  }
  sessionStorage.setItem(KEY_STORAGE, key);
  $("api-key").value = "";
  showError("");
  say("Key accepted for this tab.");
});

// --- choosing a recording ---------------------------------------------------------------------

let chosenFile = null;

function choose(file) {
  chosenFile = file;
  $("file-name").textContent = file ? `${file.name} (${(file.size / 1e6).toFixed(1)} MB)` : "";
  $("transcribe").disabled = !file;
  showError("");
}

$("file-input").addEventListener("change", (event) => choose(event.target.files[0] || null));
const dropZone = $("drop-zone");
for (const kind of ["dragenter", "dragover"]) {
  dropZone.addEventListener(kind, (event) => { event.preventDefault(); dropZone.classList.add("over"); });
}
for (const kind of ["dragleave", "drop"]) {
  dropZone.addEventListener(kind, () => dropZone.classList.remove("over"));
}
dropZone.addEventListener("drop", (event) => {
  event.preventDefault();
  if (event.dataTransfer.files.length) choose(event.dataTransfer.files[0]);
});

$("add-speaker").addEventListener("click", () => {
  const row = $("known-speaker-row").content.firstElementChild.cloneNode(true);
  row.querySelector(".remove-speaker").addEventListener("click", () => row.remove());
  $("known-speakers").append(row);
  row.querySelector(".known-name").focus();
});

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function knownSpeakers() {
  const speakers = [];
  for (const row of document.querySelectorAll(".known-speaker")) {
    const name = row.querySelector(".known-name").value.trim();
    const clip = row.querySelector(".known-clip").files[0];
    if (!name && !clip) continue;
    if (!name || !clip) throw new Error("Each known speaker needs a name and a clip of their voice.");
    speakers.push({ name, audio: await readAsDataUrl(clip) });
  }
  return speakers;
}

// --- a file: the streaming transcription route ------------------------------------------------

let transcription = null; // the AbortController of the upload in progress: Cancel aborts it

$("transcribe").addEventListener("click", () => transcribeFile().catch((error) => {
  if (error.name === "AbortError") say("Cancelled: the server stopped working on it.");
  else showError(error.message);
  finishBusy();
}));
$("cancel").addEventListener("click", () => transcription?.abort());

function startBusy(message) {
  showError("");
  say(message);
  $("transcribe").disabled = true;
  $("cancel").hidden = false;
  $("progress").hidden = false;
  $("progress").removeAttribute("value"); // indeterminate (moving) until the first words say how far it is
}

function finishBusy() {
  transcription = null;
  $("transcribe").disabled = !chosenFile;
  $("cancel").hidden = true;
  $("progress").hidden = true;
}

// What the server would refuse after the whole upload, refused before a byte is sent. A multipart
// upload adds a little to the file: the server's 413 still answers a file just under the limit.
function refuseOverLimits(file, seconds) {
  const megabytesAllowed = limits.max_upload_mb;
  if (megabytesAllowed && file.size > megabytesAllowed * 1024 * 1024) {
    throw new Error(`The recording is too big for this server: ${megabytes(file.size)}, and it takes at most ${megabytes(megabytesAllowed * 1024 * 1024)} (MAX_UPLOAD_MB). Nothing was sent.`);
  }
  if (limits.max_audio_seconds && seconds > limits.max_audio_seconds) {
    throw new Error(`The recording is too long for this server: ${clock(seconds)}, and it takes at most ${clock(limits.max_audio_seconds)} (MAX_AUDIO_SECONDS). Nothing was sent.`);
  }
}

// The recording's length, from the player's metadata (0 when the browser cannot tell soon): what
// "transcribing 0:12 of 0:30" counts against.
function mediaDuration(player, waitMs = 3000) {
  if (Number.isFinite(player.duration) && player.duration > 0) return Promise.resolve(player.duration);
  return new Promise((resolve) => {
    const done = () => resolve(Number.isFinite(player.duration) ? player.duration : 0);
    player.addEventListener("loadedmetadata", done, { once: true });
    player.addEventListener("error", () => resolve(0), { once: true });
    setTimeout(done, waitMs);
  });
}

function resetResult(source) {
  Object.assign(state, { words: [], segments: [], timeline: [], names: {}, duration: 0, source });
  history.clear();
  $("live-tail").textContent = "";
  render();
}

async function transcribeFile() {
  if (!chosenFile) return;
  if (authRequired && !apiKey()) throw new Error("This server needs an API key: enter it above first.");
  const speakers = await knownSpeakers();
  transcription = new AbortController();
  startBusy(`Uploading ${chosenFile.name} (${megabytes(chosenFile.size)})…`);
  resetResult(chosenFile.name);
  setAudio(URL.createObjectURL(chosenFile));
  const expected = await mediaDuration($("player"));
  refuseOverLimits(chosenFile, expected);
  const form = new FormData();
  form.append("file", chosenFile);
  form.append("model", "whisper-1");
  form.append("response_format", "json");
  form.append("stream", "true");
  form.append("timestamp_granularities[]", "word");
  const language = $("language").value.trim();
  if (language) form.append("language", language);
  const count = $("num-speakers").value.trim();
  if (count) form.append("num_speakers", count);
  for (const speaker of speakers) {
    form.append("known_speaker_names[]", speaker.name);
    form.append("known_speaker_references[]", speaker.audio);
  }
  let response;
  try {
    response = await fetch("v1/audio/transcriptions", { method: "POST", body: form, headers: authHeaders(), signal: transcription.signal });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new Error("The server could not be reached. Is it still running?");
  }
  if (!response.ok) {
    let message = "";
    try { message = (await response.json()).error?.message || ""; } catch { /* not JSON */ }
    throw new Error(explainStatus(response.status, message));
  }
  say("Transcribing: the text appears as each piece is done…");
  $("result").hidden = false;
  for await (const event of serverSentEvents(response)) {
    if (event.type === "transcript.text.delta") {
      state.words.push({ text: event.delta, start: event.start, end: event.end, speaker: null });
      if (expected) {
        $("progress").value = Math.min(event.end / expected, 1);
        say(`Transcribing: ${clock(Math.min(event.end, expected))} of ${clock(expected)}…`);
      }
      renderTranscript();
    } else if (event.type === "transcript.text.segment") {
      state.segments.push({ speaker: event.speaker, text: event.text, start: event.start, end: event.end });
    } else if (event.type === "transcript.text.done") {
      state.timeline = event.diarization || [];
      state.duration = event.duration || state.duration;
      attributeWords();
      render();
      const notes = (event.warnings || []).join(" ");
      say(`Done: ${state.words.length} words${state.segments.length ? `, ${speakerLabels().length} speakers` : ""}.${notes ? ` Note: ${notes}` : ""}`);
      $("result").scrollIntoView({ block: "start" }); // the transcript on the first screen, the player in reach above it
    } else if (event.type === "error") {
      throw new Error(explainStatus(event.error?.code || 500, event.error?.message || ""));
    }
  }
  finishBusy();
}

async function* serverSentEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim()).join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

function attributeWords() {
  // each word to the segment that holds its middle (segments are made of the words, one speaker each)
  let index = 0;
  for (const word of state.words) {
    const middle = (word.start + word.end) / 2;
    while (index < state.segments.length - 1 && state.segments[index].end < middle) index += 1;
    word.speaker = state.segments.length ? state.segments[index].speaker : null;
  }
}

// --- the microphone: the live WebSocket route -------------------------------------------------

$("record").addEventListener("click", () => {
  if (liveSession) liveSession.stop();
  else startLive().catch((error) => { showError(error.message); liveSession = null; setRecording(false); });
});

function setRecording(on) {
  $("record").setAttribute("aria-pressed", on ? "true" : "false");
  $("record").textContent = on ? "Stop" : "Record";
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
  if (authRequired && !apiKey()) throw new Error("This server needs an API key: enter it above first.");
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true } });
  } catch (error) {
    if (error.name === "NotAllowedError" || error.name === "SecurityError") {
      throw new Error("The browser did not allow the microphone. Allow it for this page (the icon in the address bar) and press Record again.");
    }
    throw new Error("No microphone was found. Connect one, or choose a file instead.");
  }
  resetResult("live recording");
  $("result").hidden = false;
  showError("");
  const context = new AudioContext({ sampleRate: LIVE_RATE });
  await context.audioWorklet.addModule("static/pcm-worklet.js");
  const source = context.createMediaStreamSource(stream);
  const capture = new AudioWorkletNode(context, "pcm16-capture");
  // the socket last, and its handlers set before anything is awaited again: an "open" heard by nobody is lost
  const protocols = ["realtime"];
  if (apiKey()) protocols.push(`openai-insecure-api-key.${apiKey()}`);
  const url = new URL("v1/realtime?intent=transcription", window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(url, protocols);
  const recorded = [];
  let open = false;
  let stopping = false;
  let lastCompleted = null;
  const tentative = new Map(); // item -> words final but not yet with a speaker

  let heard = 0; // samples captured: the elapsed time shown beside Record
  capture.port.onmessage = (event) => {
    const pcm = new Int16Array(event.data);
    recorded.push(pcm);
    heard += pcm.length;
    showInput(pcm, heard / LIVE_RATE);
    if (open && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ type: "input_audio_buffer.append", audio: base64(event.data) }));
    }
  };
  socket.onopen = () => {
    socket.send(JSON.stringify({
      type: "session.update",
      session: { type: "transcription", audio: { input: { format: { type: "audio/pcm", rate: LIVE_RATE }, transcription: liveTranscription() } } },
    }));
    open = true;
    source.connect(capture);
    setRecording(true);
    say("Listening: words appear as they become final.");
  };
  socket.onerror = () => {
    if (!open) showError("The live session could not start: the server refused the connection (a wrong API key, or live sessions turned off).");
  };
  socket.onclose = () => {
    finish();
  };
  socket.onmessage = (message) => {
    const event = JSON.parse(message.data);
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
        lastCompleted = event.item_id;
        if (stopping) socket.close();
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
        if (stopping && event.error?.code === "invalid_value") { socket.close(); break; }  // nothing left to commit
        if (event.error?.code === "server_busy") showError(`The server is at capacity for live sessions; try again later. (${event.error.message})`);
        else showError(event.error?.message || "The live session reported an error.");
        break;
      default:
        break;
    }
  };
  const turnStarts = new Map();
  function lastTurnStart(item) { return turnStarts.get(item) ?? 0; }

  function finish() {
    if (!liveSession) return;
    liveSession = null;
    $("record-input").hidden = true;
    source.disconnect();
    stream.getTracks().forEach((track) => track.stop());
    context.close();
    setRecording(false);
    const samples = concatenate(recorded);
    state.duration = samples.length / LIVE_RATE;
    setAudio(URL.createObjectURL(wavBlob(samples, LIVE_RATE)));
    attributeWords();
    render();
    $("live-tail").textContent = "";
    say(`Stopped: ${state.words.length} words, ${speakerLabels().length} speakers. Listen, rename and download below.`);
    void lastCompleted;
  }

  liveSession = {
    stop() {
      stopping = true;
      source.disconnect();
      say("Finishing the last words…");
      if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
      else finish();
    },
  };
}

function liveTranscription() {
  const transcription = { model: "whisper-1" };
  const language = $("language").value.trim();
  if (language) transcription.language = language;
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

function concatenate(pieces) {
  const total = pieces.reduce((sum, piece) => sum + piece.length, 0);
  const all = new Int16Array(total);
  let offset = 0;
  for (const piece of pieces) { all.set(piece, offset); offset += piece.length; }
  return all;
}

function wavBlob(samples, rate) {
  const header = new DataView(new ArrayBuffer(44));
  const text = (offset, value) => [...value].forEach((character, index) => header.setUint8(offset + index, character.charCodeAt(0)));
  text(0, "RIFF"); header.setUint32(4, 36 + samples.length * 2, true); text(8, "WAVE"); text(12, "fmt ");
  header.setUint32(16, 16, true); header.setUint16(20, 1, true); header.setUint16(22, 1, true); header.setUint32(24, rate, true);
  header.setUint32(28, rate * 2, true); header.setUint16(32, 2, true); header.setUint16(34, 16, true); text(36, "data");
  header.setUint32(40, samples.length * 2, true);
  return new Blob([header, samples.buffer], { type: "audio/wav" });
}

// --- showing it: speakers, timeline, transcript, the playing word -----------------------------

function speakerLabels() {
  const labels = [];
  for (const item of [...state.segments, ...state.timeline]) if (item.speaker && !labels.includes(item.speaker)) labels.push(item.speaker);
  return labels;
}

function nameOf(label) {
  return state.names[label] || label || "Speaker";
}

function colourOf(label) {
  const index = speakerLabels().indexOf(label);
  return index < 0 ? "#6b7280" : COLOURS[index % COLOURS.length];
}

function render() {
  $("undo").disabled = history.empty;
  renderSpeakers();
  renderTimeline();
  renderTranscript();
}

function renderSpeakers() {
  const box = $("speakers");
  box.replaceChildren();
  for (const label of speakerLabels()) {
    const wrapper = document.createElement("div");
    wrapper.className = "speaker";
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colourOf(label);
    const input = document.createElement("input");
    input.value = nameOf(label);
    input.setAttribute("aria-label", `Name of ${label}`);
    input.dataset.label = label;
    input.addEventListener("change", () => rename(label, input));
    wrapper.append(swatch, input);
    box.append(wrapper);
  }
}

function rename(label, input) {
  // a name another speaker has already asks to merge the two: one person, one name
  const name = input.value.trim() || label;
  const other = speakerLabels().find((each) => each !== label && nameOf(each) === name);
  if (other && !window.confirm(`${name} is already a speaker here. Merge ${nameOf(label)} into ${name}? Their turns become one person's.`)) {
    input.value = nameOf(label);
    return;
  }
  correct(() => (other ? mergeSpeakers(state, label, other) : (state.names[label] = name)), !other);
}

function correct(change, namesOnly = false) {
  // every correction goes through here: saved for Undo first, then shown (a rename in place)
  history.save(state);
  try {
    change();
  } catch (error) {
    history.undo(state);
    showError(error.message);
    return;
  }
  showError("");
  if (namesOnly) showNames();
  else render();
  $("undo").disabled = history.empty;
}

function undo() {
  if (!history.undo(state)) return;
  render();
  $("undo").disabled = history.empty;
}

$("undo").addEventListener("click", undo);

function showNames() {
  // names changed in place: re-rendering would swap the elements under a click that blurred the name field
  for (const element of document.querySelectorAll(".turn-speaker[data-label], .lane-name[data-label]")) {
    element.textContent = nameOf(element.dataset.label);
  }
  for (const bar of document.querySelectorAll(".turn-bar[data-label]")) {
    bar.title = `${nameOf(bar.dataset.label)} ${clock(Number(bar.dataset.start))}–${clock(Number(bar.dataset.end))}`;
  }
  for (const option of document.querySelectorAll(".turn-move option[value]:not([value=''])")) {
    option.textContent = nameOf(option.value);
  }
  for (const play of document.querySelectorAll(".turn-play[data-label]")) {
    play.setAttribute("aria-label", `Play ${nameOf(play.dataset.label)} from ${play.dataset.clock}`);
  }
  describeTimeline();
}

function describeTimeline() {
  const labels = speakerLabels();
  $("timeline").setAttribute("aria-label", labels.length ? `Who spoke when: ${labels.map(nameOf).join(", ")}` : "No speakers");
}

function renderTimeline() {
  // a lane per speaker, named with their current name, over a time axis; a click plays from where it lands
  const box = $("timeline");
  box.replaceChildren();
  const labels = speakerLabels();
  const duration = state.duration || Math.max(0, ...state.timeline.map((turn) => turn.end), ...state.words.map((word) => word.end));
  describeTimeline();
  if (!duration || !labels.length) return;
  const names = document.createElement("div");
  names.className = "lane-names";
  const lanes = document.createElement("div");
  lanes.className = "lanes";
  for (const label of labels) {
    const name = document.createElement("div");
    name.className = "lane-name";
    name.dataset.label = label;
    name.textContent = nameOf(label);
    name.style.color = colourOf(label);
    names.append(name);
    const lane = document.createElement("div");
    lane.className = "lane";
    lane.dataset.label = label;
    lane.addEventListener("click", (event) => {
      const box = lane.getBoundingClientRect();
      seek((duration * (event.clientX - box.left)) / box.width, true);
    });
    for (const turn of state.timeline.filter((item) => item.speaker === label)) {
      const bar = document.createElement("div");
      bar.className = "turn-bar";
      Object.assign(bar.dataset, { label, start: turn.start, end: turn.end });
      bar.style.left = `${(100 * turn.start) / duration}%`;
      bar.style.width = `${Math.max((100 * (turn.end - turn.start)) / duration, 0.3)}%`;
      bar.style.background = colourOf(label);
      bar.title = `${nameOf(label)} ${clock(turn.start)}–${clock(turn.end)}`;
      lane.append(bar);
    }
    lanes.append(lane);
  }
  const head = document.createElement("div");
  head.className = "playhead";
  head.id = "playhead";
  head.style.left = `${(100 * Math.min($("player").currentTime, duration)) / duration}%`;
  lanes.append(head);
  box.append(names, lanes, document.createElement("div"));
  box.append(axis(duration, lanes.getBoundingClientRect().width));
}

window.addEventListener("resize", () => { if (!$("result").hidden) renderTimeline(); });

function axis(duration, width) {
  // ticks at a round step, as many as fit the lanes' width with room for their labels (at most eight)
  const most = Math.max(1, Math.min(8, Math.floor(width / 56)));
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
  const step = steps.find((seconds) => duration / seconds <= most) || 7200;
  const line = document.createElement("div");
  line.className = "axis";
  line.setAttribute("aria-hidden", "true");
  for (let at = 0; at < duration; at += step) {
    const tick = document.createElement("span");
    tick.className = "tick";
    tick.style.left = `${(100 * at) / duration}%`;
    tick.textContent = clock(at);
    line.append(tick);
  }
  return line;
}

function turns() {
  // consecutive words of one speaker form a turn
  const result = [];
  for (const [index, word] of state.words.entries()) {
    const last = result.at(-1);
    if (last && last.speaker === word.speaker) last.words.push(index);
    else result.push({ speaker: word.speaker, words: [index] });
  }
  return result;
}

function renderTranscript() {
  const list = $("transcript");
  list.replaceChildren();
  for (const turn of turns()) {
    const item = document.createElement("li");
    item.className = "turn";
    const head = document.createElement("div");
    head.className = "turn-head";
    const who = document.createElement("span");
    who.className = "turn-speaker";
    if (turn.speaker) who.dataset.label = turn.speaker;
    who.textContent = turn.speaker ? nameOf(turn.speaker) : "…";
    who.style.color = colourOf(turn.speaker);
    const start = state.words[turn.words[0]].start;
    const play = document.createElement("button");
    play.type = "button";
    play.className = "turn-play";
    play.textContent = `▶ ${clock(start)}`;
    play.setAttribute("aria-label", `Play ${turn.speaker ? nameOf(turn.speaker) : "this turn"} from ${clock(start)}`);
    if (turn.speaker) Object.assign(play.dataset, { label: turn.speaker, clock: clock(start) });
    play.addEventListener("click", () => seek(start, true));
    head.append(who, play);
    if (turn.speaker && !liveSession) head.append(turnControls(turn, item));
    const text = document.createElement("p");
    text.className = turn.speaker ? "" : "pending";
    for (const index of turn.words) {
      const word = state.words[index];
      const span = document.createElement("span");
      span.className = "word";
      span.textContent = word.text;
      span.dataset.index = index;
      text.append(span);
    }
    item.append(head, text);
    list.append(item);
  }
}

function turnControls(turn, item) {
  // Edit (the turn's words, in place) and Speaker (move the turn to another speaker, or a new one)
  const first = turn.words[0];
  const last = turn.words.at(-1);
  const edit = document.createElement("button");
  edit.type = "button";
  edit.className = "turn-edit";
  edit.textContent = "Edit";
  edit.setAttribute("aria-label", `Edit the words of ${nameOf(turn.speaker)} at ${clock(state.words[first].start)}`);
  edit.addEventListener("click", () => editInPlace(item, first, last));
  const move = document.createElement("select");
  move.className = "turn-move";
  move.setAttribute("aria-label", `Speaker of the turn at ${clock(state.words[first].start)}`);
  for (const label of speakerLabels()) move.append(new Option(nameOf(label), label, false, label === turn.speaker));
  move.append(new Option("New speaker", ""));
  move.addEventListener("change", () => correct(() => moveTurn(state, first, last, move.value || newSpeakerLabel(state))));
  const tools = document.createElement("div");
  tools.className = "turn-tools";
  tools.append(edit, move);
  return tools;
}

function editInPlace(item, first, last) {
  const text = item.querySelector("p");
  const box = document.createElement("textarea");
  box.className = "turn-text";
  box.value = state.words.slice(first, last + 1).map((word) => word.text).join("").trim();
  box.rows = Math.max(2, Math.ceil(box.value.length / 70));
  box.setAttribute("aria-label", "The turn's words");
  const save = document.createElement("button");
  save.type = "button";
  save.textContent = "Save";
  save.addEventListener("click", () => correct(() => editTurn(state, first, last, box.value)));
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.textContent = "Cancel";
  cancel.addEventListener("click", renderTranscript);
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); save.click(); }
    if (event.key === "Escape") cancel.click();
  });
  const editor = document.createElement("div");
  editor.className = "turn-editor";
  editor.append(box, save, cancel);
  text.replaceWith(editor);
  box.focus();
}

$("transcript").addEventListener("click", (event) => {
  const word = event.target.closest(".word");
  if (word) seek(state.words[Number(word.dataset.index)].start, true);
});

function megabytes(bytes) {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1e3))} kB`;
}

function setAudio(url) {
  const player = $("player");
  if (player.dataset.url) URL.revokeObjectURL(player.dataset.url);
  player.src = url;
  player.dataset.url = url;
}

$("player").addEventListener("loadedmetadata", () => {
  if (Number.isFinite($("player").duration)) state.duration = state.duration || $("player").duration;
});

function seek(seconds, play = false) {
  const player = $("player");
  player.currentTime = seconds;
  if (play) player.play().catch(() => {});
  highlight();
}

let highlighted = null;
function highlight() {
  const now = $("player").currentTime;
  let current = null;
  for (const [index, word] of state.words.entries()) {
    if (word.start <= now && now < Math.max(word.end, word.start + 0.05)) { current = index; break; }
  }
  if (current !== highlighted) {
    document.querySelector(".word.current")?.classList.remove("current");
    if (current !== null) document.querySelector(`.word[data-index="${current}"]`)?.classList.add("current");
    highlighted = current;
  }
  const head = $("playhead");
  if (head && state.duration) head.style.left = `${(100 * now) / state.duration}%`;
}

function tick() {
  if (!$("player").paused) highlight();
  requestAnimationFrame(tick);
}
$("player").addEventListener("seeked", highlight);
requestAnimationFrame(tick);

document.addEventListener("keydown", (event) => {
  // Space plays and pauses, the arrows go back and on 5 s, Ctrl+Z undoes a correction: while the result is shown
  // and no field or button has the keys
  const player = $("player");
  if ($("result").hidden || event.target.closest?.("input, textarea, select, button, [contenteditable], audio, summary")) return;
  if ((event.ctrlKey || event.metaKey) && event.key === "z" && !event.shiftKey && !event.altKey) {
    undo();
    event.preventDefault();
    return;
  }
  if (!player.src || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === " ") {
    if (player.paused) player.play().catch(() => {});
    else player.pause();
  } else if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
    const seconds = player.currentTime + (event.key === "ArrowLeft" ? -5 : 5);
    seek(Math.min(Math.max(seconds, 0), Number.isFinite(player.duration) ? player.duration : seconds));
  } else {
    return;
  }
  event.preventDefault();
});

function clock(seconds) {
  const whole = Math.max(0, Math.floor(seconds));
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}

// --- taking it away -------------------------------------------------------------------------

for (const button of document.querySelectorAll("[data-export]")) {
  button.addEventListener("click", () => {
    const format = button.dataset.export;
    const { text, type } = exportAs(format, state, nameOf);
    const link = document.createElement("a");
    const base = (state.source || "transcript").replace(/\.[^.]+$/, "") || "transcript";
    link.href = URL.createObjectURL(new Blob([text], { type }));
    link.download = `${base}.${format}`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  });
}

checkAuth();
