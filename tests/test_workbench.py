"""The workbench's one way of reporting (bench/results.py): what a script prints is what it saves."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from documentation import ROOT

sys.path.insert(0, str(ROOT))
from bench.results import Table


def test_a_table_prints_each_row_as_it_comes_and_saves_the_same_rows_as_json_and_markdown(tmp_path, capsys):
    table = Table("speed", (("system", "system", ""), ("seconds", "s", ".1f"), ("note", "note", "")), title="Speed", note=["2 cores"])
    table.add(system="ours", seconds=1.234, note="a | b\nc")
    first = capsys.readouterr().out
    assert first.startswith("**Speed**") and "| system | s | note |" in first and "| ours | 1.2 | a \\| b\\nc |" in first
    table.add(system="theirs", seconds=None)
    assert capsys.readouterr().out == "| theirs | - | - |\n", "later rows print alone, a missing value as -"
    saved = json.loads(table.save(tmp_path).read_text())
    assert saved["rows"] == [{"system": "ours", "seconds": 1.234, "note": "a | b\nc"}, {"system": "theirs", "seconds": None}]
    assert saved["command"].startswith(Path(sys.executable).name), "the command that made the figures"
    assert (tmp_path / "speed.md").read_text() == first + "| theirs | - | - |\n"


def test_a_table_of_cells_already_written_keys_them_by_header_and_wants_one_per_column(capsys):
    table = Table.of_headers("written", ("system", "WER"))
    table.add_cells("ours", "7.5 %")
    assert table.rows == [{"system": "ours", "WER": "7.5 %"}] and capsys.readouterr().out.endswith("| ours | 7.5 % |\n")
    with pytest.raises(ValueError):
        table.add_cells("theirs")


def test_every_script_prints_its_tables_through_the_shared_table():
    """A Markdown table printed by hand would have no JSON beside it."""
    by_hand = [str(path.relative_to(ROOT)) for path in (ROOT / "bench").rglob("*.py")
               if path.name != "results.py" and "|---" in path.read_text()]
    assert not by_hand, f"print through bench.results.Table: {by_hand}"
