// Showing the result: the speakers (renamed in place), the timeline, the transcript by turn, and the
// corrections made to it (corrections.js), each undoable.

import { $, clock, element, say, session, showError, speakerName, state } from "./common.js";
import { History, editTurn, mergeSpeakers, moveTurn, newSpeakerLabel } from "./corrections.js";
import { keysTakenElsewhere, seek } from "./player.js";
import { library, saveVoice } from "./voices.js";

const COLOURS = ["#2456c6", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#be185d", "#4d7c0f", "#475569"];
const history = new History(); // the corrections made to this result, to undo

export function resetResult(source) {
  Object.assign(state, { words: [], segments: [], timeline: [], names: {}, warnings: [], duration: 0, source });
  history.clear();
  $("live-tail").textContent = "";
  render();
}

export function attributeWords() {
  // each word to the segment that holds its middle (segments are made of the words, one speaker each)
  let index = 0;
  for (const word of state.words) {
    const middle = (word.start + word.end) / 2;
    while (index < state.segments.length - 1 && state.segments[index].end < middle) index += 1;
    word.speaker = state.segments.length ? state.segments[index].speaker : null;
  }
}

// --- showing it: speakers, timeline, transcript, the playing word -----------------------------

export function speakerLabels() {
  const labels = [];
  for (const item of [...state.segments, ...state.timeline]) if (item.speaker && !labels.includes(item.speaker)) labels.push(item.speaker);
  return labels;
}

export function nameOf(label) {
  return state.names[label] || label || "Speaker";
}

function colourOf(label) {
  const index = speakerLabels().indexOf(label);
  return index < 0 ? "#6b7280" : COLOURS[index % COLOURS.length];
}

export function render() {
  $("undo").disabled = history.empty;
  renderSpeakers();
  renderTimeline();
  renderTranscript();
}

function renderSpeakers() {
  const box = $("speakers");
  box.replaceChildren();
  for (const label of speakerLabels()) {
    const wrapper = element("div", "speaker");
    const swatch = element("span", "swatch");
    swatch.style.background = colourOf(label);
    const input = document.createElement("input");
    input.value = nameOf(label);
    input.setAttribute("aria-label", `Name of ${label}`);
    input.dataset.label = label;
    input.addEventListener("change", () => rename(label, input));
    wrapper.append(swatch, input);
    if (library.enrolment && !session.live && session.recording) {
      const save = element("button", "save-voice");
      save.type = "button";
      save.textContent = "Save voice";
      save.dataset.label = label;
      save.setAttribute("aria-label", `Save the voice of ${nameOf(label)} in the voice library`);
      save.addEventListener("click", () => saveVoice(label, nameOf(label)).catch((error) => showError(error.message)));
      wrapper.append(save);
    }
    box.append(wrapper);
  }
}

document.addEventListener("voices-loaded", renderSpeakers);

function rename(label, input) {
  // a name another speaker has already asks to merge the two: one person, one name
  const name = speakerName(input.value) || label;
  input.value = name;
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

export function undo() {
  if (!history.undo(state)) return;
  render();
  $("undo").disabled = history.empty;
}

$("undo").addEventListener("click", undo);
document.addEventListener("keydown", (event) => {
  // Ctrl+Z (Cmd+Z) undoes a correction, under the same conditions as the player's keys
  if (keysTakenElsewhere(event) || !(event.ctrlKey || event.metaKey) || event.key !== "z" || event.shiftKey || event.altKey) return;
  undo();
  event.preventDefault();
});

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
  for (const save of document.querySelectorAll(".save-voice[data-label]")) {
    save.setAttribute("aria-label", `Save the voice of ${nameOf(save.dataset.label)} in the voice library`);
  }
  for (const play of document.querySelectorAll(".turn-play[data-label]")) {
    play.setAttribute("aria-label", `Play ${nameOf(play.dataset.label)} from ${play.dataset.clock}`);
  }
  describeTimeline();
  if (state.warnings.length) sayDone();
}

export function sayDone() {
  // the result's summary and the server's warnings, speakers under the names they have now (a rename says it again)
  const labels = speakerLabels();
  const pattern = new RegExp(labels.map((label) => label.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g");
  const notes = state.warnings.map((text) => (labels.length ? text.replace(pattern, nameOf) : text)).join(" ");
  say(`Done: ${state.words.length} words${state.segments.length ? `, ${labels.length} speakers` : ""}.${notes ? ` Note: ${notes}` : ""}`);
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
  const names = element("div", "lane-names");
  const lanes = element("div", "lanes");
  for (const label of labels) {
    const name = element("div", "lane-name");
    name.dataset.label = label;
    name.textContent = nameOf(label);
    name.style.color = colourOf(label);
    names.append(name);
    const lane = element("div", "lane");
    lane.dataset.label = label;
    lane.addEventListener("click", (event) => {
      const box = lane.getBoundingClientRect();
      seek((duration * (event.clientX - box.left)) / box.width, true);
    });
    for (const turn of state.timeline.filter((item) => item.speaker === label)) {
      const bar = element("div", "turn-bar");
      Object.assign(bar.dataset, { label, start: turn.start, end: turn.end });
      bar.style.left = `${(100 * turn.start) / duration}%`;
      bar.style.width = `${Math.max((100 * (turn.end - turn.start)) / duration, 0.3)}%`;
      bar.style.background = colourOf(label);
      bar.title = `${nameOf(label)} ${clock(turn.start)}–${clock(turn.end)}`;
      lane.append(bar);
    }
    lanes.append(lane);
  }
  const head = element("div", "playhead");
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
  const line = element("div", "axis");
  line.setAttribute("aria-hidden", "true");
  for (let at = 0; at < duration; at += step) {
    const tick = element("span", "tick");
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

export function renderTranscript() {
  const list = $("transcript");
  list.replaceChildren();
  for (const turn of turns()) {
    const item = element("li", "turn");
    const head = element("div", "turn-head");
    const who = element("span", "turn-speaker");
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
    if (turn.speaker && !session.live) head.append(turnControls(turn, item));
    const text = document.createElement("p");
    text.className = turn.speaker ? "" : "pending";
    for (const index of turn.words) {
      const word = state.words[index];
      const span = element("span", "word");
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
  const move = element("select", "turn-move");
  move.setAttribute("aria-label", `Speaker of the turn at ${clock(state.words[first].start)}`);
  for (const label of speakerLabels()) move.append(new Option(nameOf(label), label, false, label === turn.speaker));
  move.append(new Option("New speaker", ""));
  move.addEventListener("change", () => correct(() => moveTurn(state, first, last, move.value || newSpeakerLabel(state))));
  const tools = element("div", "turn-tools");
  tools.append(edit, move);
  return tools;
}

function editInPlace(item, first, last) {
  const text = item.querySelector("p");
  const box = element("textarea", "turn-text");
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
  const editor = element("div", "turn-editor");
  editor.append(box, save, cancel);
  text.replaceWith(editor);
  box.focus();
}

$("transcript").addEventListener("click", (event) => {
  const word = event.target.closest(".word");
  if (!word) return;
  const index = Number(word.dataset.index);
  seek(state.words[index].start, true);
  if (!session.live && state.words[index].speaker) showEdgeTools(word.closest(".turn"), index);
});

function showEdgeTools(item, index) {
  // The most common diarization error is a few words at a turn's edge that belong to the neighbour ("So I
  // don't" said by the next speaker): from a clicked word, give the rest of the turn to the next speaker, or
  // the turn up to it to the previous one.
  for (const old of document.querySelectorAll(".edge-tools")) old.remove();
  const all = turns();
  const at = all.findIndex((turn) => turn.words.includes(index));
  const turn = all[at];
  const before = all.slice(0, at).reverse().find((other) => other.speaker);
  const after = all.slice(at + 1).find((other) => other.speaker);
  const first = turn.words[0];
  const last = turn.words.at(-1);
  const word = state.words[index].text.trim();
  const tools = element("div", "edge-tools");
  if (after && after.speaker !== turn.speaker) {
    tools.append(edgeButton(`“${word}” to the end → ${nameOf(after.speaker)}`,
      `Move the words from “${word}” to the end of this turn to ${nameOf(after.speaker)}`,
      () => moveTurn(state, index, last, after.speaker)));
  }
  if (before && before.speaker !== turn.speaker) {
    tools.append(edgeButton(`${nameOf(before.speaker)} ← the start to “${word}”`,
      `Move the words from the start of this turn to “${word}” to ${nameOf(before.speaker)}`,
      () => moveTurn(state, first, index, before.speaker)));
  }
  if (tools.childElementCount) item.append(tools);  // under the turn's words, in their column
}

function edgeButton(text, label, change) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "edge-move";
  button.textContent = text;
  button.setAttribute("aria-label", label);
  button.addEventListener("click", () => correct(change));
  return button;
}
