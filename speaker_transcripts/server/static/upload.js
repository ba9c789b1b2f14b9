// A file: chosen or dropped, checked against the server's limits, sent to the streaming transcription
// route (POST /v1/audio/transcriptions, stream=true) with a progress bar and Cancel.

import { $, clock, explainStatus, megabytes, say, session, showError, state } from "./common.js";
import { apiKey, authHeaders } from "./auth.js";
import { attributeWords, render, renderTranscript, resetResult, sayDone } from "./view.js";
import { setAudio } from "./player.js";
import { chosenVoices } from "./voices.js";

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
  const megabytesAllowed = session.limits.max_upload_mb;
  if (megabytesAllowed && file.size > megabytesAllowed * 1024 * 1024) {
    throw new Error(`The recording is too big for this server: ${megabytes(file.size)}, and it takes at most ${megabytes(megabytesAllowed * 1024 * 1024)} (MAX_UPLOAD_MB). Nothing was sent.`);
  }
  if (session.limits.max_audio_seconds && seconds > session.limits.max_audio_seconds) {
    throw new Error(`The recording is too long for this server: ${clock(seconds)}, and it takes at most ${clock(session.limits.max_audio_seconds)} (MAX_AUDIO_SECONDS). Nothing was sent.`);
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

async function transcribeFile() {
  if (!chosenFile) return;
  if (session.authRequired && !apiKey()) throw new Error("This server needs an API key: enter it above first.");
  const speakers = await knownSpeakers();
  transcription = new AbortController();
  startBusy(`Uploading ${chosenFile.name} (${megabytes(chosenFile.size)})…`);
  resetResult(chosenFile.name);
  setAudio(chosenFile);
  const expected = await mediaDuration($("player"));
  refuseOverLimits(chosenFile, expected);
  const form = new FormData();
  form.append("file", chosenFile);
  form.append("model", "whisper-1");
  form.append("response_format", "json");
  form.append("stream", "true");
  form.append("progress", "true");  // the server's stages and the audio decoded, before the first words
  form.append("timestamp_granularities[]", "word");
  const language = $("language").value.trim();
  if (language) form.append("language", language);
  const count = $("num-speakers").value.trim();
  if (count) form.append("num_speakers", count);
  for (const speaker of speakers) {
    form.append("known_speaker_names[]", speaker.name);
    form.append("known_speaker_references[]", speaker.audio);
  }
  const voices = chosenVoices();  // the library's people ticked, when not all of them ("" alone: nobody)
  for (const name of voices ? (voices.length ? voices : [""]) : []) form.append("voices[]", name);
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
    if (event.type === "transcript.progress") {
      showProgress(event.stage, event.seconds, expected);
    } else if (event.type === "transcript.text.delta") {
      state.words.push({ text: event.delta, start: event.start, end: event.end, speaker: null });
      showProgress("transcribing", event.end, expected);
      renderTranscript();
    } else if (event.type === "transcript.text.segment") {
      state.segments.push({ speaker: event.speaker, text: event.text, start: event.start, end: event.end });
    } else if (event.type === "transcript.text.done") {
      state.timeline = event.diarization || [];
      state.duration = event.duration || state.duration;
      attributeWords();
      render();
      state.warnings = event.warnings || [];
      sayDone();
      $("result").scrollIntoView({ block: "start" }); // the transcript on the first screen, the player in reach above it
    } else if (event.type === "error") {
      throw new Error(explainStatus(event.error?.code || 500, event.error?.message || ""));
    }
  }
  finishBusy();
}

const STAGES = { "finding speech": "Finding the speech", transcribing: "Transcribing", diarizing: "Telling the speakers apart" };

function showProgress(stage, seconds, expected) {
  // the bar moves with the audio decoded (most of the work), then waits on the speakers; it never goes back
  const bar = $("progress");
  const decoded = expected ? Math.min(seconds / expected, 1) : 0;
  const at = stage === "diarizing" ? 0.95 : stage === "finding speech" ? 0.02 : 0.05 + 0.9 * decoded;
  bar.value = Math.max(Number(bar.value) || 0, at);
  if (stage === "transcribing" && expected) say(`Transcribing: ${clock(Math.min(seconds, expected))} of ${clock(expected)}…`);
  else say(`${STAGES[stage] || "Working"}…`);
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
