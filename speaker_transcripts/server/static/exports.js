// What is on the page, as files: the speakers under the names given on the page.
// txt: one paragraph per speaker turn; srt/vtt: the page's words made into cues by the server
// (POST /v1/subtitles), by the rules of every other route; json: the page's words, segments and
// timeline; rttm: the speaker timeline (who spoke when).

import { authHeaders } from "./auth.js";

// segments with text, from the words (a speaker change, a sentence end or a pause ends one)
function segments(state) {
  const result = [];
  for (const word of state.words) {
    const last = result.at(-1);
    const ended = last && (/[.?!]$/.test(last.text.trim()) || word.start - last.end > 1.0 || word.start - last.start > 7.0);
    if (last && last.speaker === word.speaker && !ended) {
      last.text += word.text;
      last.end = word.end;
    } else {
      result.push({ speaker: word.speaker, text: word.text, start: word.start, end: word.end });
    }
  }
  return result.map((segment) => ({ ...segment, text: segment.text.trim() })).filter((segment) => segment.text);
}

export async function exportAs(format, state, nameOf) {
  const named = (label) => (label ? nameOf(label) : null);
  if (format === "txt") {
    const paragraphs = [];
    for (const segment of segments(state)) {
      const last = paragraphs.at(-1);
      if (last && last.speaker === segment.speaker) last.text += ` ${segment.text}`;
      else paragraphs.push({ ...segment });
    }
    const text = paragraphs.map((p) => (named(p.speaker) ? `${named(p.speaker)}: ${p.text}` : p.text)).join("\n");
    return { text: `${text}\n`, type: "text/plain;charset=utf-8" };
  }
  if (format === "srt" || format === "vtt") {
    const words = state.words.map((w) => ({ text: w.text, start: w.start ?? 0, end: Math.max(w.end ?? 0, w.start ?? 0), speaker: named(w.speaker) }));
    const answer = await fetch("v1/subtitles", {
      method: "POST", body: JSON.stringify({ format, words }), headers: { ...authHeaders(), "Content-Type": "application/json" },
    });
    if (!answer.ok) throw new Error(`The server could not make the subtitles (HTTP ${answer.status}).`);
    const type = format === "srt" ? "application/x-subrip;charset=utf-8" : "text/vtt;charset=utf-8";
    return { text: await answer.text(), type };
  }
  if (format === "json") {
    const body = {
      source: state.source,
      duration: state.duration,
      speakers: segments(state).map((s) => ({ speaker: named(s.speaker), text: s.text, timestamp: [s.start, s.end] })),
      words: state.words.map((w) => ({ text: w.text, timestamp: [w.start, w.end], speaker: named(w.speaker) })),
      diarization: state.timeline.map((t) => ({ speaker: named(t.speaker), start: t.start, end: t.end })),
    };
    return { text: `${JSON.stringify(body, null, 2)}\n`, type: "application/json" };
  }
  if (format === "rttm") {
    const uri = (state.source || "audio").replace(/\.[^.]+$/, "").replace(/\s+/g, "_") || "audio";
    const lines = state.timeline.map((turn) => {
      const who = (named(turn.speaker) || "unknown").replace(/\s+/g, "_");
      return `SPEAKER ${uri} 1 ${turn.start.toFixed(3)} ${(turn.end - turn.start).toFixed(3)} <NA> <NA> ${who} <NA> <NA>`;
    });
    return { text: lines.length ? `${lines.join("\n")}\n` : "", type: "text/plain;charset=utf-8" };
  }
  throw new Error(`unknown export format ${format}`);
}
