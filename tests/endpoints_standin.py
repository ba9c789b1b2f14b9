"""A local stand-in for the Inference Endpoints API and the Hub's whoami, recording what it gets.

Just enough of the real API for ``speaker-transcripts deploy``: create (POST), get (GET), update (PUT), and a status
that advances one step per GET, so waiting and failure paths can be exercised.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

NAMESPACE = "alice"


class EndpointsStandIn:
    def __init__(self, statuses: list[str], existing: dict[str, Any] | None = None) -> None:
        self.statuses = statuses  # the states GETs walk through after a create or update
        self.requests: list[dict[str, Any]] = []
        self.endpoints: dict[str, dict[str, Any]] = dict(existing or {})
        self._step: dict[str, int] = {}
        self.app = self._build()

    def _build(self) -> FastAPI:
        app = FastAPI()

        @app.get("/api/whoami-v2")
        async def whoami(request: Request) -> dict[str, Any]:
            await self._record(request)
            return {"name": NAMESPACE, "type": "user", "orgs": [], "auth": {"accessToken": {"role": "write"}}}

        @app.post("/v2/endpoint/{namespace}")
        async def create(namespace: str, request: Request) -> dict[str, Any]:
            body = await self._record(request)
            self.endpoints[body["name"]] = body
            self._step[body["name"]] = 0
            return self._view(body["name"])

        @app.get("/v2/endpoint/{namespace}/{name}")
        async def get(namespace: str, name: str, request: Request) -> Any:
            await self._record(request)
            if name not in self.endpoints:
                return JSONResponse({"error": "Endpoint not found"}, status_code=404)
            self._step[name] = min(self._step.get(name, 0) + 1, len(self.statuses) - 1)
            return self._view(name)

        @app.put("/v2/endpoint/{namespace}/{name}")
        async def update(namespace: str, name: str, request: Request) -> dict[str, Any]:
            body = await self._record(request)
            self.endpoints[name] = {**self.endpoints[name], **body, "name": name}
            self._step[name] = 0
            return self._view(name)

        return app

    async def _record(self, request: Request) -> dict[str, Any]:
        body = await request.json() if await request.body() else {}
        self.requests.append({
            "method": request.method, "path": request.url.path,
            "authorization": request.headers.get("authorization"), "json": body,
        })
        return body

    def _view(self, name: str) -> dict[str, Any]:
        stored = self.endpoints[name]
        state = self.statuses[self._step.get(name, 0)]
        model = {"framework": "pytorch", "revision": None, "task": "custom", **stored.get("model", {})}
        return {
            **stored,
            "name": name,
            "model": model,
            "type": stored.get("type", "protected"),
            "healthRoute": "/health",
            "status": {
                "state": state,
                "message": "Endpoint failed to start: handler raised RuntimeError" if state == "failed" else "",
                "url": f"https://{name}.example.endpoints" if state == "running" else None,
                "createdAt": "2026-11-29T00:00:00Z",
                "updatedAt": "2026-11-29T00:00:00Z",
            },
        }
