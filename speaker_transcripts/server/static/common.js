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
  if (status === 401) return "The API key is missing or wrong. Enter this server's key above and try again.";
  if (status === 413) return `The recording is too big or too long for this server: ${serverMessage}`;
  if (status === 503) return `The server is busy right now; try again in a moment. (${serverMessage})`;
  if (status === 400 || status === 422) return `The server could not use this request: ${serverMessage}`;
  return `Something went wrong on the server (HTTP ${status}). ${serverMessage || ""}`.trim();
}

export function megabytes(bytes) {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1e3))} kB`;
}

export function clock(seconds) {
  const whole = Math.max(0, Math.floor(seconds));
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}

// What the page's parts share beyond the transcript: whether the server wants a key, its limits (GET /ready's
// MAX_UPLOAD_MB and MAX_AUDIO_SECONDS: a file over them is not sent) and the live session in progress.
export const session = { authRequired: false, limits: {}, live: null };
