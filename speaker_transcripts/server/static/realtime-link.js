// How Record reaches the live session: a WebRTC call (POST v1/realtime/calls, the microphone as an Opus
// track, events on the "oai-events" data channel) when the server offers one, else the WebSocket
// (GET v1/realtime, base64 PCM in events). With an API key, the page mints a client secret with it and
// opens the session with the secret: the key itself never goes with the audio.

import { authHeaders } from "./auth.js";
import { explainStatus, session } from "./common.js";

// A short-lived key for one session (POST v1/realtime/client_secrets), or "" when the server needs none.
async function clientSecret() {
  if (!session.authRequired) return "";
  const answer = await fetch("v1/realtime/client_secrets", {
    method: "POST", headers: { ...authHeaders(), "Content-Type": "application/json" }, body: JSON.stringify({ expires_after: { seconds: 60 } }),
  });
  if (!answer.ok) throw new Error(`The live session could not start. ${explainStatus(answer.status, (await answer.json().catch(() => ({}))).error?.message)}`);
  return (await answer.json()).value;
}

// A link: send(event), close(); on.open(), on.event(event), on.close(reason) are called as it goes.
// The call is tried first where offered; a call the server or the network refuses falls back to the socket,
// whose own answer says whether the server is at capacity (a call's 503 may be its UDP ports alone).
export async function openLink(stream, on) {
  const secret = await clientSecret();
  if (session.realtime?.webrtc && window.RTCPeerConnection) {
    try {
      return await openCall(stream, secret, on);
    } catch (error) {
      console.warn(`WebRTC call failed (${error.message}); recording over the WebSocket instead`);
    }
  }
  return openSocket(secret, on);
}

const CONNECT_MS = 10000; // a call whose data channel has not opened by then is given up for the socket

async function openCall(stream, secret, on) {
  const peer = new RTCPeerConnection();
  stream.getAudioTracks().forEach((track) => peer.addTrack(track, stream));
  const channel = peer.createDataChannel("oai-events");
  await peer.setLocalDescription(await peer.createOffer());
  const answer = await fetch("v1/realtime/calls?intent=transcription", {
    method: "POST", body: peer.localDescription.sdp,
    headers: { "Content-Type": "application/sdp", ...(secret ? { Authorization: `Bearer ${secret}` } : {}) },
  });
  if (answer.status !== 201) {
    peer.close();
    throw new Error(`the server answered the call ${answer.status}`);
  }
  await peer.setRemoteDescription({ type: "answer", sdp: await answer.text() });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      peer.close();
      // the server holds a live slot for the call until it connects: hang it up, so the WebSocket gets that slot
      fetch(`${answer.headers.get("Location").slice(1)}/hangup`, { method: "POST", headers: authHeaders() })
        .catch(() => {}).finally(() => reject(new Error("the call did not connect")));
    }, CONNECT_MS);
    channel.onopen = () => { clearTimeout(timer); resolve(); };
  });
  let closed = false;
  const ended = () => { if (!closed) { closed = true; peer.close(); on.close(); } };
  channel.onmessage = (message) => on.event(JSON.parse(message.data));
  channel.onclose = ended;
  peer.onconnectionstatechange = () => { if (["failed", "closed"].includes(peer.connectionState)) ended(); };
  const link = {
    kind: "WebRTC", sendsAudio: false,
    send: (event) => { if (channel.readyState === "open") channel.send(JSON.stringify(event)); },
    close: ended,
  };
  queueMicrotask(() => on.open(link));
  return link;
}

function openSocket(secret, on) {
  const protocols = ["realtime"];
  if (secret) protocols.push(`openai-insecure-api-key.${secret}`);
  const url = new URL("v1/realtime?intent=transcription", window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(url, protocols);
  let opened = false;
  const link = {
    kind: "WebSocket", sendsAudio: true,
    send: (event) => { if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(event)); },
    close: () => socket.close(),
  };
  socket.onopen = () => { opened = true; on.open(link); };
  socket.onerror = () => {
    if (!opened) on.refused("The live session could not start: the server refused the connection (a wrong API key, or live sessions turned off).");
  };
  socket.onclose = () => on.close();
  socket.onmessage = (message) => on.event(JSON.parse(message.data));
  return link;
}
