// The API key: asked for once when the server wants one, kept for this tab only (sessionStorage).

import { $, say, session, showError } from "./common.js";

const KEY_STORAGE = "speaker-transcripts-api-key";
// --- the API key ------------------------------------------------------------------------------

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

export function authHeaders() {
  return apiKey() ? { Authorization: `Bearer ${apiKey()}` } : {};
}

export async function checkAuth() {
  try {
    const ready = await (await fetch("ready")).json();
    session.authRequired = Boolean(ready.auth);
    session.limits = ready.limits || {};
    session.realtime = ready.realtime || {};
  } catch {
    session.authRequired = false;
  }
  $("key-panel").hidden = !session.authRequired || Boolean(apiKey());  // asked for until one is accepted
  if (session.authRequired && !apiKey()) say("This server needs an API key: enter it above.");
}

window.addEventListener("api-key-refused", () => {
  // the key kept for this tab no longer works (the server's changed): ask for it again
  sessionStorage.removeItem(KEY_STORAGE);
  $("key-panel").hidden = !session.authRequired;
});

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
  $("key-panel").hidden = true;
  showError("");
  say("Key accepted for this tab.");
  window.dispatchEvent(new Event("api-key"));  // what needed the key can be loaded now (voices.js)
});
