"""The example's backend: serves index.html and mints a client secret for it (GET /token), as in OpenAI's
WebRTC guide. It holds the API key; the page gets only a secret that opens one realtime session.

    SERVER_URL=http://localhost:8000 API_KEY=... python backend.py  # then open http://localhost:3000
    (the speaker-transcripts server runs with ALLOWED_ORIGINS=http://localhost:3000)

Standard library only. Pointed at OpenAI instead (SERVER_URL=https://api.openai.com, API_KEY=sk-...),
the same page works unchanged but for its SERVER_URL line.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SERVER_URL = os.environ.get("SERVER_URL", "http://localhost:8000").rstrip("/")
API_KEY = os.environ.get("API_KEY", "")
PAGE = (Path(__file__).parent / "index.html").read_bytes()
SESSION = {"type": "transcription", "audio": {"input": {"transcription": {"model": "whisper-1"}}}}


class Backend(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/":
            self._answer(200, "text/html; charset=utf-8", PAGE.replace(b"http://localhost:8000", SERVER_URL.encode()))
        elif self.path == "/token":
            self._answer(*mint())
        else:
            self._answer(404, "text/plain", b"not found")

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def mint() -> tuple[int, str, bytes]:
    """POST /v1/realtime/client_secrets with the key: the secret, or the server's refusal as it came."""
    request = urllib.request.Request(
        f"{SERVER_URL}/v1/realtime/client_secrets", method="POST",
        data=json.dumps({"expires_after": {"anchor": "created_at", "seconds": 60}, "session": SESSION}).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {API_KEY}"} if API_KEY else {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return 200, "application/json", answer.read()
    except urllib.error.HTTPError as refusal:
        return refusal.code, "application/json", refusal.read()


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "3000"))
    print(f"open http://localhost:{port} (minting secrets at {SERVER_URL})")
    ThreadingHTTPServer(("127.0.0.1", port), Backend).serve_forever()
