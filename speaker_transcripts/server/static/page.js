// The page: a recording in (a file, or the microphone), who said what out, to listen through,
// correct and take away. It talks to the server's own routes: POST /v1/audio/transcriptions with
// stream=true for a file (text as pieces finish, then the speakers), and the live WebSocket
// (GET /v1/realtime, OpenAI's Realtime protocol) for the microphone. No dependencies, no build.
// ES modules by concern, served as they are: common (state, status, errors), auth (the key), upload
// (a file), live (the microphone), view (speakers, timeline, transcript; corrections.js), player, voices
// (the server's voice library) and exports; this one starts the page and wires the downloads.

import "./live.js";
import "./upload.js";
import { checkAuth } from "./auth.js";
import { exportAs } from "./exports.js";
import { nameOf } from "./view.js";
import { loadVoices } from "./voices.js";
import { showError, state } from "./common.js";

// --- taking it away -------------------------------------------------------------------------

for (const button of document.querySelectorAll("[data-export]")) {
  button.addEventListener("click", async () => {
    const format = button.dataset.export;
    let exported;
    try {
      exported = await exportAs(format, state, nameOf);
    } catch (error) {
      showError(error.message);
      return;
    }
    const { text, type } = exported;
    const link = document.createElement("a");
    const base = (state.source || "transcript").replace(/\.[^.]+$/, "") || "transcript";
    link.href = URL.createObjectURL(new Blob([text], { type }));
    link.download = `${base}.${format}`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  });
}

checkAuth().then(loadVoices);
