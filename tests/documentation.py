"""The documented text the tests read: the README, then the documentation site's pages (docs/*.md).

Commands and examples move between the README and the docs; the tests that run them read both, so an
example is exercised wherever it is written.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_text() -> str:
    """The README first (its first command is the main one), then every docs page."""
    return "\n".join(path.read_text() for path in PAGES)


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", documented_text(), flags=re.DOTALL)
