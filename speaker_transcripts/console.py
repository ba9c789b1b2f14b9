"""The package's own log lines on the console: a line per model loaded, the server's notices.

Every surface a person starts (the CLI, ``speaker-transcripts serve``, ``uvicorn
speaker_transcripts.server.app:app``) shows them on stderr as written; library noise stays
silenced at its source. A program that configures logging itself keeps its configuration.
"""

from __future__ import annotations

import logging
import sys
import unicodedata
from typing import Any


class _ConsoleHandler(logging.StreamHandler):
    """Writes each line to ``sys.stderr`` as it is when the line is logged, not as it was when the
    handler was made: a caller (or a test harness) that swaps stderr and closes its own would
    otherwise get "--- Logging error --- I/O operation on closed file" for every later line."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


def show_package_log() -> None:
    """The package's own log lines (a line per model loaded, the server's notices) on stderr, as
    written: a command's user reads them; library noise stays silenced at its source."""
    package = logging.getLogger("speaker_transcripts")
    if not any(isinstance(handler, _ConsoleHandler) for handler in package.handlers):  # added once per process
        handler = _ConsoleHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        package.addHandler(handler)
    package.setLevel(logging.INFO)


def show_package_log_unless_configured() -> None:
    """``show_package_log`` when nobody has set up logging for the package or the root logger (a
    server started by ``uvicorn ...:app`` printed no model-load line before)."""
    if not logging.getLogger("speaker_transcripts").handlers and not logging.getLogger().handlers:
        show_package_log()


def one_line(text: str) -> str:
    """``text`` safe to print as part of one console line: line breaks, separators and other control
    characters escaped (``\\n``, ``\\u2028``), so a file name cannot end a line and forge the next."""
    return "".join(
        character.encode("unicode_escape").decode() if unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp") else character
        for character in text
    )
