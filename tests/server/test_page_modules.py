"""The page's ES modules import one another in one direction, as the Python package does: no cycle."""

from __future__ import annotations

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "speaker_transcripts" / "server" / "static"
IMPORT = re.compile(r"""^import\s+(?:[^"';]*?\s+from\s+)?["']\./([\w-]+\.js)["']""", re.MULTILINE)


def imports() -> dict[str, set[str]]:
    return {path.name: set(IMPORT.findall(path.read_text())) for path in STATIC.glob("*.js")}


def test_the_reader_sees_the_imports():
    graph = imports()
    assert "common.js" in graph["view.js"] and "player.js" in graph["view.js"] and "live.js" in graph["page.js"]


def test_the_page_modules_import_without_a_cycle():
    graph = imports()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for imported in graph.get(module, ()):
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
