// What every part of the page shares: the transcript's state, the element lookup, the status line,
// errors in words people understand, and how times and sizes are written.

export const $ = (id) => document.getElementById(id);
export const state = {
  words: [],        // {text, start, end, speaker}
  segments: [],     // {speaker, text, start, end}
  timeline: [],     // {speaker, start, end}: who spoke when, overlaps kept
  names: {},        // label -> the name shown (renamed by the user)
  warnings: [],     // the server's, about this result (e.g. two voices that may be one person)
  duration: 0,
  source: "recording",
};

export function element(tag, className = "") {
  // a new element with its class: the page builds its result out of many of them
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

// --- errors people understand ------------------------------------------------------------------

export function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
  if (message) say("");  // what was under way ("Uploading…") has stopped: the error is the news
}

export function say(message) {
  $("status").textContent = message;
}

export function explainStatus(status, serverMessage) {
  if (status === 401) {
    window.dispatchEvent(new Event("api-key-refused"));  // auth.js asks for the key again
    return "The API key is missing or wrong. Enter this server's key above and try again.";
  }
  if (status === 413) return `The recording is too big or too long for this server: ${serverMessage}`;
  if (status === 503) return `The server is busy right now; try again in a moment. (${serverMessage})`;
  if (status === 400 || status === 422) return `The server could not use this request: ${serverMessage}`;
  return `Something went wrong on the server (HTTP ${status}). ${serverMessage || ""}`.trim();
}

export function speakerName(text) {
  // a name as the server's speaker_name takes it: NFC, any run of spaces, line or paragraph separators and
  // control characters one space, at most 64 characters: no name breaks a subtitle or a text export's line
  return text.normalize("NFC").replace(/[\p{C}\s]+/gu, " ").trim().slice(0, 64).trim();
}

export function megabytes(bytes) {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1e3))} kB`;
}

export function concatenate(pieces) {
  // Int16Array pieces as one
  const total = pieces.reduce((sum, piece) => sum + piece.length, 0);
  const all = new Int16Array(total);
  let offset = 0;
  for (const piece of pieces) { all.set(piece, offset); offset += piece.length; }
  return all;
}

export function wavBlob(samples, rate) {
  // 16-bit mono PCM samples (an Int16Array) as a WAV file: the recording for the player, a voice for the library
  const header = new DataView(new ArrayBuffer(44));
  const text = (offset, value) => [...value].forEach((character, index) => header.setUint8(offset + index, character.charCodeAt(0)));
  text(0, "RIFF"); header.setUint32(4, 36 + samples.length * 2, true); text(8, "WAVE"); text(12, "fmt ");
  header.setUint32(16, 16, true); header.setUint16(20, 1, true); header.setUint16(22, 1, true); header.setUint32(24, rate, true);
  header.setUint32(28, rate * 2, true); header.setUint16(32, 2, true); header.setUint16(34, 16, true); text(36, "data");
  header.setUint32(40, samples.length * 2, true);
  return new Blob([header, samples.buffer], { type: "audio/wav" });
}

export function clock(seconds) {
  const whole = Math.max(0, Math.floor(seconds));
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}

// What the page's parts share beyond the transcript: whether the server wants a key, its limits (GET /ready's
// MAX_UPLOAD_MB and MAX_AUDIO_SECONDS: a file over them is not sent) and the live session in progress.
// The recording shown (a File or Blob: the player's source) is kept for cutting voices from (voices.js).
export const session = { authRequired: false, limits: {}, realtime: {}, live: null, recording: null };
