// Corrections to a transcript on the page: a turn's words edited, a turn moved to another speaker,
// two speakers merged into one, each undoable. They change the page's state (words, timeline,
// names) and nothing else, so every export, built from that state, carries them.

// A turn is a run of consecutive words of one speaker: `first` and `last` index state.words.

export function editTurn(state, first, last, text) {
  // The turn's words become `text`. Words that stay where they were keep their times; with a
  // different count, the new words share the turn's span in proportion to their length.
  const old = state.words.slice(first, last + 1);
  const pieces = text.trim().split(/\s+/).filter(Boolean);
  if (!pieces.length) throw new Error("A turn needs at least one word; to drop a turn, edit its neighbours instead.");
  const speaker = old[0].speaker;
  let words;
  if (pieces.length === old.length) {
    words = old.map((word, index) => ({ ...word, text: ` ${pieces[index]}` }));
  } else {
    const start = old[0].start;
    const span = Math.max(old.at(-1).end - start, 0.01 * pieces.length);
    const total = pieces.reduce((sum, piece) => sum + piece.length + 1, 0);
    let at = start;
    words = pieces.map((piece) => {
      const length = (span * (piece.length + 1)) / total;
      const word = { text: ` ${piece}`, start: at, end: at + length, speaker };
      at += length;
      return word;
    });
  }
  state.words.splice(first, last - first + 1, ...words);
}

export function moveTurn(state, first, last, speaker) {
  // The turn's words and its stretch of the timeline go to `speaker` (a label, new or not).
  const from = state.words[first].speaker;
  const start = state.words[first].start;
  const end = state.words[last].end;
  for (let index = first; index <= last; index += 1) state.words[index].speaker = speaker;
  const timeline = [];
  for (const turn of state.timeline) {
    if (turn.speaker !== from || turn.end <= start || turn.start >= end) {
      timeline.push(turn);
      continue;
    }
    if (turn.start < start) timeline.push({ ...turn, end: start });
    if (turn.end > end) timeline.push({ ...turn, start: end });
  }
  timeline.push({ speaker, start, end });
  state.timeline = timeline.sort((a, b) => a.start - b.start);
}

export function mergeSpeakers(state, from, into) {
  // Everything of `from` becomes `into`'s: one person under one name.
  for (const item of [...state.words, ...state.segments, ...state.timeline]) if (item.speaker === from) item.speaker = into;
  delete state.names[from];
}

export function newSpeakerLabel(state) {
  // A label no speaker has yet, in the server's form.
  const taken = new Set([...state.words, ...state.timeline].map((item) => item.speaker));
  let number = 0;
  while (taken.has(`SPEAKER_${String(number).padStart(2, "0")}`)) number += 1;
  return `SPEAKER_${String(number).padStart(2, "0")}`;
}

export class History {
  // The states before each correction, newest last; bounded so a long session cannot grow it forever.
  constructor(limit = 100) {
    this.limit = limit;
    this.saved = [];
  }

  save(state) {
    const { words, segments, timeline, names } = state;
    this.saved.push(structuredClone({ words, segments, timeline, names }));
    if (this.saved.length > this.limit) this.saved.shift();
  }

  undo(state) {
    const last = this.saved.pop();
    if (last) Object.assign(state, last);
    return Boolean(last);
  }

  clear() {
    this.saved = [];
  }

  get empty() {
    return this.saved.length === 0;
  }
}
