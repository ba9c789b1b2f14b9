// What is on the page, as files: the speakers under the names given on the page.
// txt: one paragraph per speaker turn; srt/vtt: a cue per sentence-sized segment with its speaker;
// json: the page's words, segments and timeline; rttm: the speaker timeline (who spoke when).

function timestamp(seconds, marker) {
  const milliseconds = Math.round(Math.max(0, seconds) * 1000);
  const hours = Math.floor(milliseconds / 3600000);
  const minutes = Math.floor((milliseconds % 3600000) / 60000);
  const secs = Math.floor((milliseconds % 60000) / 1000);
  const pad = (value, width = 2) => String(value).padStart(width, "0");
  return `${pad(hours)}:${pad(minutes)}:${pad(secs)}${marker}${pad(milliseconds % 1000, 3)}`;
}

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

function subtitleSafe(text) {
  return text.replaceAll("<", "‹").replaceAll(">", "›").replaceAll("{", "(").replaceAll("}", ")");
}

function vttEscape(text) {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

export function exportAs(format, state, nameOf) {
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
  if (format === "srt") {
    const cues = segments(state).map((segment, index) => {
      const who = named(segment.speaker);
      const line = who ? `${subtitleSafe(who)}: ${subtitleSafe(segment.text)}` : subtitleSafe(segment.text);
      return `${index + 1}\n${timestamp(segment.start, ",")} --> ${timestamp(Math.max(segment.end, segment.start + 0.01), ",")}\n${line}\n`;
    });
    return { text: cues.join("\n"), type: "application/x-subrip;charset=utf-8" };
  }
  if (format === "vtt") {
    const cues = segments(state).map((segment) => {
      const who = named(segment.speaker);
      const line = who ? `<v ${vttEscape(who)}>${vttEscape(segment.text)}</v>` : vttEscape(segment.text);
      return `${timestamp(segment.start, ".")} --> ${timestamp(Math.max(segment.end, segment.start + 0.01), ".")}\n${line}\n`;
    });
    return { text: `WEBVTT\n\n${cues.join("\n")}`, type: "text/vtt;charset=utf-8" };
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
