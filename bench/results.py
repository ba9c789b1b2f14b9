"""How the workbench's scripts report: a Markdown table printed a row at a time as results come (a person
follows the run), and the same rows saved as JSON beside a copy of the table, with the command that made
them (``Table.save``), so a figure in the docs can be traced to its run and compared with the next one.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Column = tuple[str, str, str]  # (key in the row, header, format spec: "" prints the value as it is)


def cell(value: Any, spec: str = "") -> str:
    """One Markdown cell: ``value`` formatted by ``spec`` (None: "-"), kept on one line and out of the table's bars."""
    if value is None:
        return "-"
    text = format(value, spec) if spec else str(value)
    return text.replace("\n", "\\n").replace("|", "\\|")


@dataclass
class Table:
    """One results table: ``name`` names its files, ``title`` is printed above it (with ``note`` lines, such
    as the machine and model it ran on); ``add`` takes a row's raw values by the columns' keys."""

    name: str
    columns: tuple[Column, ...]
    title: str = ""
    note: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of_headers(cls, name: str, headers: tuple[str, ...], title: str = "") -> Table:
        """A table of cells already written out: each column keyed and headed by its header."""
        return cls(name, tuple((header, header, "") for header in headers), title=title)

    def add_cells(self, *cells: Any) -> None:
        """``add`` a row given as one cell per column, in the columns' order."""
        self.add(**dict(zip((key for key, _, _ in self.columns), cells, strict=True)))

    def add(self, **row: Any) -> None:
        """Keep ``row`` and print it (the header first, before the first row)."""
        if not self.rows:
            print(self._head(), flush=True)
        self.rows.append(row)
        print(self._line(row), flush=True)

    def markdown(self) -> str:
        return "\n".join([self._head(), *map(self._line, self.rows)])

    def save(self, out: Path) -> Path:
        """Write ``out/NAME.md`` (the table as printed) and ``out/NAME.json`` (the command, when it finished, the
        columns and the raw rows); the JSON's path."""
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.name}.md").write_text(self.markdown() + "\n", encoding="utf-8")
        record = {"command": shlex.join([Path(sys.executable).name, *sys.argv]), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "title": self.title, "note": self.note, "columns": [{"key": key, "header": header} for key, header, _ in self.columns],
                  "rows": self.rows}
        path = out / f"{self.name}.json"
        path.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
        return path

    def _head(self) -> str:
        above = [f"**{self.title}**", ""] if self.title else []
        above += [*self.note, ""] if self.note else []
        headers = [header for _, header, _ in self.columns]
        return "\n".join([*above, f"| {' | '.join(headers)} |", "|" + "---|" * len(headers)])

    def _line(self, row: dict[str, Any]) -> str:
        return "| " + " | ".join(cell(row.get(key), spec) for key, _, spec in self.columns) + " |"
