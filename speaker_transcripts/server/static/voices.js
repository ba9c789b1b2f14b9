// The server's voice library in the page: the people enrolled there (GET /v1/voices: names only), ticked
// to say who may be named in a recording, removed with their button (DELETE /v1/voices/{name}), and
// "Save voice" for a speaker of a result: the turns where they speak alone, cut from the recording in the
// browser (16 kHz mono WAV) and enrolled (POST /v1/voices).

import { $, concatenate, element, explainStatus, say, session, showError, state, wavBlob } from "./common.js";
import { authHeaders } from "./auth.js";

const RATE = 16000;
const CLIP_S = 20;  // the server takes up to 30 s of a voice; 20 s of a person alone is plenty
const LEAST_S = 2;  // less than this of one person alone makes a poor voice (the server wants 1 s of speech)

export const library = { enrolment: false, names: [] };

export async function loadVoices() {
  // the library's people (after the key, when the server wants one: a 401 leaves the list as it was)
  let answer;
  try {
    answer = await fetch("v1/voices", { headers: authHeaders() });
  } catch {
    return;
  }
  if (!answer.ok) return;
  const body = await answer.json();
  library.enrolment = Boolean(body.enrolment);
  library.names = body.voices.map((voice) => voice.name);
  showChoices();
  document.dispatchEvent(new Event("voices-loaded"));
}

function showChoices() {
  // a checkbox per person, ticked unless the user unticked them before
  const unticked = new Set([...document.querySelectorAll("#library-people input:not(:checked)")].map((box) => box.value));
  const list = $("library-people");
  list.replaceChildren();
  for (const name of library.names) {
    const label = element("label", "library-person");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = name;
    box.checked = !unticked.has(name);
    label.append(box, ` ${name}`);
    const remove = element("button", "remove-voice");
    remove.type = "button";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", `Remove ${name} from the voice library`);
    remove.addEventListener("click", () => removeVoice(name));
    const person = element("span", "library-entry");
    person.append(label, remove);
    list.append(person);
  }
  $("library").hidden = !library.names.length;
}

async function removeVoice(name) {
  if (!window.confirm(`Remove ${name} from the server's voice library? No recording will name them after this.`)) return;
  let answer;
  try {
    answer = await fetch(`v1/voices/${encodeURIComponent(name)}`, { method: "DELETE", headers: authHeaders() });
  } catch {
    showError("The server could not be reached. Is it still running?");
    return;
  }
  if (!answer.ok && answer.status !== 404) {  // 404: already gone (removed elsewhere): the list below shows it
    let message = "";
    try { message = (await answer.json()).error?.message || ""; } catch { /* not JSON */ }
    showError(explainStatus(answer.status, message));
    return;
  }
  showError("");
  say(`Removed ${name} from the voice library.`);
  await loadVoices();
}

export function chosenVoices() {
  // null when everyone in the library is ticked (the server's default); else the ticked names ([]: nobody)
  const boxes = [...document.querySelectorAll("#library-people input")];
  if (boxes.every((box) => box.checked)) return null;
  return boxes.filter((box) => box.checked).map((box) => box.value);
}

export async function saveVoice(label, shown) {
  const suggested = /^SPEAKER_\d+$/.test(shown) ? "" : shown;
  const name = (window.prompt(`Save the voice of ${shown} in the server's voice library as:`, suggested) || "").trim();
  if (!name) return;
  const known = library.names.find((each) => each.toLowerCase() === name.toLowerCase());
  if (known && !window.confirm(`${known} is already in the voice library. Replace their voice with this one?`)) return;
  const clip = await aloneClip(label);
  if (!clip) {
    showError(`${shown} speaks alone for less than ${LEAST_S} s of this recording: too little to save a voice.`);
    return;
  }
  say(`Saving ${name}'s voice…`);
  const form = new FormData();
  form.append("name", name);
  form.append("file", clip, "voice.wav");
  let answer;
  try {
    answer = await fetch("v1/voices", { method: "POST", body: form, headers: authHeaders() });
  } catch {
    showError("The server could not be reached. Is it still running?");
    return;
  }
  if (!answer.ok) {
    let message = "";
    try { message = (await answer.json()).error?.message || ""; } catch { /* not JSON */ }
    showError(explainStatus(answer.status, message));
    return;
  }
  const saved = await answer.json();
  showError("");
  say(`Saved ${saved.name}'s voice: the server names them in every recording from now on.`);
  await loadVoices();
}

async function aloneClip(label) {
  // the speaker's turns that overlap nobody else's, longest first, up to CLIP_S seconds, as one WAV
  const others = state.timeline.filter((turn) => turn.speaker !== label);
  const alone = state.timeline
    .filter((turn) => turn.speaker === label && !others.some((other) => other.start < turn.end && other.end > turn.start))
    .sort((one, other) => (other.end - other.start) - (one.end - one.start));
  const picked = [];
  let seconds = 0;
  for (const turn of alone) {
    if (seconds >= CLIP_S) break;
    const end = Math.min(turn.end, turn.start + CLIP_S - seconds);
    picked.push([turn.start, end]);
    seconds += end - turn.start;
  }
  if (seconds < LEAST_S) return null;
  let audio;
  try {
    audio = await new OfflineAudioContext(1, 1, RATE).decodeAudioData(await session.recording.arrayBuffer());  // at 16 kHz
  } catch {
    throw new Error("This browser cannot decode the recording to cut the voice from it; enrol it with speaker-transcripts speakers add.");
  }
  const channels = [...Array(audio.numberOfChannels).keys()].map((index) => audio.getChannelData(index));
  const pieces = picked.sort((one, other) => one[0] - other[0]).map(([start, end]) => {
    const first = Math.floor(start * RATE);
    const pcm = new Int16Array(Math.max(0, Math.min(Math.ceil(end * RATE), audio.length) - first));
    for (let index = 0; index < pcm.length; index += 1) {
      const mixed = channels.reduce((sum, channel) => sum + channel[first + index], 0) / channels.length;
      pcm[index] = Math.max(-1, Math.min(1, mixed)) * 32767;
    }
    return pcm;
  });
  return wavBlob(concatenate(pieces), RATE);
}

window.addEventListener("api-key", loadVoices);
