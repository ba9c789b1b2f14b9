"""``GET /docs``: the API's interactive documentation (Swagger UI) from this server's own files.

FastAPI's default page loads Swagger UI from a CDN, on the origin where the page (``GET /``) keeps the
person's API key in ``sessionStorage``: whoever serves that script could read the key. Here Swagger UI's
files come from the ``fastapi-offline`` package (``/docs/assets``; Swagger UI 5, which reads FastAPI's
OpenAPI 3.1; ``swagger-ui-bundle``'s 4.15 cannot) and a script of ours starts it (``static/docs.js``, not
FastAPI's inline one), under a Content-Security-Policy that runs this server's scripts only. ReDoc is
off (one set of docs); ``/openapi.json`` is the schema.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from speaker_transcripts.server.routers.page import SecuredFiles

# Swagger UI sets style attributes and draws its icons as data: SVGs; scripts stay this server's.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Speaker-attributed transcription: API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" href="/docs/assets/favicon.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/static/docs.js"></script>
</body>
</html>
"""

SWAGGER_FILES = Path(fastapi_offline.__file__).parent / "static"  # swagger-ui-bundle.js, swagger-ui.css, favicon.png

router = APIRouter()


@router.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    return HTMLResponse(PAGE, headers=SECURITY_HEADERS)


def swagger_assets() -> SecuredFiles:
    return SecuredFiles(directory=SWAGGER_FILES, headers=SECURITY_HEADERS)
