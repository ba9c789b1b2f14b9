// The player bound to the words: seeking, the playing word highlighted, the keyboard. It imports nothing from
// the view: view.js calls seek(), never the other way round.

import { $, session, state } from "./common.js";

export function setAudio(recording) {
  // the recording (a File or Blob) to play, and to cut voices from (voices.js: the page's CSP lets it read no blob: URL)
  const player = $("player");
  if (player.dataset.url) URL.revokeObjectURL(player.dataset.url);
  session.recording = recording;
  player.src = player.dataset.url = URL.createObjectURL(recording);
}

$("player").addEventListener("loadedmetadata", () => {
  if (Number.isFinite($("player").duration)) state.duration = state.duration || $("player").duration;
});

export function keysTakenElsewhere(event) {
  // the page's shortcuts apply only while the result is shown and no field or button has the keys
  return $("result").hidden || Boolean(event.target.closest?.("input, textarea, select, button, [contenteditable], audio, summary"));
}

export function seek(seconds, play = false) {
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
  // Space plays and pauses, the arrows go back and on 5 s: while the result is shown and no field or button has
  // the keys (Ctrl+Z, undoing a correction, is view.js's)
  const player = $("player");
  if (keysTakenElsewhere(event)) return;
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
