"""The page: ``GET /`` serves a self-contained web page (``server/static/``) to drop a recording or
talk, and read, listen to, correct and download who said what. It is static: it calls the server's
own routes (the streaming transcription route for a file, the live WebSocket for the microphone)
with the key the person enters, so it is open like ``/health`` while every route it calls keeps
its ``API_KEY``. No CDN, no build step: it works offline. ``POST /`` stays the Endpoints route.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent.parent / "static"
# Everything from this server and nothing else: no inline script, no third party.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self' blob:; "
        "connect-src 'self' ws: wss:; worker-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter()


@router.get("/", include_in_schema=False)
async def page() -> Response:
    """The page (a browser's request; ``POST /`` is the Endpoints route)."""
    return FileResponse(STATIC / "index.html", media_type="text/html", headers=SECURITY_HEADERS)


class SecuredFiles(StaticFiles):
    """Static files served with the security headers of the page they belong to."""

    def __init__(self, directory: Path, headers: dict[str, str]) -> None:
        super().__init__(directory=directory)
        self.security_headers = headers

    async def get_response(self, path: str, scope: dict) -> Response:  # type: ignore[override]
        response = await super().get_response(path, scope)
        response.headers.update(self.security_headers)
        return response


def static_assets() -> SecuredFiles:
    """The page's scripts and styles, with the page's security headers."""
    return SecuredFiles(directory=STATIC, headers=SECURITY_HEADERS)
