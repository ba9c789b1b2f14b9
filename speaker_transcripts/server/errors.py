"""The server's refusals and failures, as answers: one status and one message per error type.

Each surface answers in its own shape (OpenAI's error object on ``/v1``, Inference Endpoints'
``{"error": message}`` elsewhere); a bug is logged with the secrets blanked out and answered 500
without its details.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.errors import AudioTooLongError, InvalidRequestError, RequestAbandoned

logger = logging.getLogger("speaker_transcripts.server")
CLIENT_CLOSED = 499


class ServiceError(Exception):
    """A refusal with its HTTP status, a message for the client and optional headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class ModelLoadError(RuntimeError):
    """The models could not load; the message says why and what to do."""


class SecretRedactor:
    """Blanks the configured secrets out of text bound for the log: an exception message (from
    our code or a library's) may quote a token, and a traceback quotes the message."""

    def __init__(self, *settings: Any) -> None:
        secrets = (getattr(each, name, None) for each in settings for name in ("hf_token", "api_key"))
        self._secrets = [secret.get_secret_value() for secret in secrets if secret is not None]

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


# A query parameter that looks like a credential, whether or not it is the configured one (a mistyped
# key is still somebody's secret): its value is blanked from the log.
CREDENTIAL_PARAMETER = re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth|authorization|password)=)[^&\s\"]*")


class RedactingFilter(logging.Filter):
    """Blanks the secrets, and any credential-like query parameter, out of a log record's arguments
    (Uvicorn's logs quote the request line and a WebSocket's URL, query string included)."""

    def __init__(self, redact: SecretRedactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(CREDENTIAL_PARAMETER.sub(r"\1***", self.redact(arg)) if isinstance(arg, str) else arg
                                for arg in record.args)
        return True


CLIENT_FAULTS = {"Invalid UTF-8 sequence received from client.": "a WebSocket client sent text that is not UTF-8; closed it (1007)"}


class ClientFaultsInOneLine(logging.Filter):
    """Uvicorn logs a client's bad WebSocket text frame (bytes that are not UTF-8) with a traceback,
    though it is the client's fault and it is answered (closed with 1007): one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in CLIENT_FAULTS:
            record.msg, record.args, record.exc_info, record.exc_text = CLIENT_FAULTS[record.msg], (), None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def error_response(path: str, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """OpenAI's error shape on ``/v1`` routes, Inference Endpoints' ``{"error": message}`` elsewhere."""
    if path.startswith("/v1/"):
        kind = "invalid_request_error" if status < 500 else "server_error"
        body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    else:
        body = {"error": message}
    return JSONResponse(body, status_code=status, headers=headers)


def status_of(error: BaseException) -> tuple[int, str]:
    """The status and message an error handler would answer ``error`` with (for stream events)."""
    if isinstance(error, ServiceError):
        return error.status, error.message
    if isinstance(error, AudioTooLongError):
        return 413, str(error)
    if isinstance(error, InvalidRequestError):
        return 400, str(error)
    return 500, "internal error while processing the audio; the server log has the details"


def add_error_handlers(app: FastAPI, settings: ServerSettings) -> None:
    def on(error_type: type[Exception]) -> Callable[[Callable[..., JSONResponse]], Callable[..., Awaitable[JSONResponse]]]:
        def register(build: Callable[..., JSONResponse]) -> Callable[..., Awaitable[JSONResponse]]:
            async def handle(request: Request, error: Any) -> JSONResponse:
                return build(request.url.path, error)

            app.add_exception_handler(error_type, handle)
            return handle

        return register

    async def refused(request: Request, error: Exception) -> JSONResponse:
        status, message = status_of(error)
        return error_response(request.url.path, status, message, getattr(error, "headers", None))

    for refusal in (ServiceError, InvalidRequestError):  # AudioTooLongError is an InvalidRequestError (413)
        app.add_exception_handler(refusal, refused)

    async def abandoned(request: Request, error: Exception) -> JSONResponse:
        logger.info("request to %s abandoned by its client; its work was stopped", request.url.path)
        return error_response(request.url.path, CLIENT_CLOSED, str(error))  # nobody reads it; nginx's code for the log

    app.add_exception_handler(RequestAbandoned, abandoned)

    @on(RequestValidationError)
    def schema(path: str, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'][1:]) or 'body'}: {item['msg']}" for item in error.errors()
        )
        return error_response(path, 422, f"invalid request: {problems}")

    @on(StarletteHTTPException)
    def http_error(path: str, error: StarletteHTTPException) -> JSONResponse:
        return error_response(path, error.status_code, str(error.detail), getattr(error, "headers", None))

    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        # the redactor knows HF_TOKEN only once the models are loaded; API_KEY from the start
        redact = getattr(request.app.state, "redact", None) or SecretRedactor(settings)
        path = request.url.path
        logger.error("request to %s failed: %s", path, redact("".join(traceback.format_exception(error))))
        return error_response(path, 500, "internal error while processing the request; the server log has the details")

    app.add_exception_handler(Exception, unexpected)
