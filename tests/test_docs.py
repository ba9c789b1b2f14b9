"""The documentation site: it builds with ``mkdocs build --strict`` (a broken link, anchor or page fails),
its configuration page is generated from the settings classes, and every page opens with what a user
wants to do. The pages' commands and examples are run by ``test_readme.py`` (it reads the docs too)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest
from documentation import PAGES, ROOT, python_blocks
from pydantic import Field
from pydantic_settings import BaseSettings

from speaker_transcripts.config import ModelSettings, ServerSettings

DOCS = ROOT / "docs"


def settings_reference():
    spec = importlib.util.spec_from_file_location("settings_reference", DOCS / "hooks" / "settings_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("settings", [ModelSettings, ServerSettings], ids=lambda cls: cls.__name__)
def test_every_setting_has_a_description(settings):
    missing = [name for name, field in settings.model_fields.items() if not (field.description or "").strip()]
    assert not missing, f"{settings.__name__}: give these Field(description=...), the configuration page shows it: {missing}"


def test_the_configuration_page_lists_every_environment_variable_from_the_classes():
    reference = settings_reference()
    assert set(reference.SETTINGS_CLASSES.values()) == {ModelSettings, ServerSettings}
    page = reference.render((DOCS / "configuration.md").read_text())
    for settings in (ModelSettings, ServerSettings):
        for name, field in settings.model_fields.items():
            row = next((line for line in page.splitlines() if line.startswith(f"| `{reference.variable(name, field)}` |")), None)
            assert row is not None, name
            assert field.description.split()[0] in row
    assert "| `HF_TOKEN` | secret | – |" in page and "| `LIVE_MAX_SESSIONS` | integer (≥ 0, ≤ 256) | `auto` |" in page
    assert "<!-- settings:" not in page


def test_a_setting_without_a_description_fails_the_page():
    class Undocumented(BaseSettings):
        documented: int = Field(default=1, description="a number")
        forgotten: str = "x"

    with pytest.raises(ValueError, match="Undocumented.forgotten has no description"):
        settings_reference().settings_table(Undocumented)


def test_every_page_opens_with_what_a_user_wants_to_do():
    for page in sorted(DOCS.glob("*.md")):
        if page.name in ("index.md", "changelog.md"):
            continue
        paragraphs = [part for part in page.read_text().split("\n\n") if part.strip()]
        assert paragraphs[0].startswith("# "), page.name
        assert paragraphs[1].startswith("You want"), f"{page.name} opens with: {paragraphs[1][:80]!r}"


def test_every_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert {page.name for page in DOCS.glob("*.md")} == set(re.findall(r"\b([\w-]+\.md)\b", nav))


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert not re.search(r"\bround (one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen)\b", readme, re.IGNORECASE)
    assert not re.search(r"\b\d{1,2} (November|December) 20\d\d\b", readme)


def test_every_python_example_is_run_by_a_test():
    """Each ```python block of the README and the docs is executed by a test, found by a line it holds."""
    run = ["audio.transcriptions.create", "requests.post(", "InferenceClient(token=HF_TOKEN)", "client.realtime.connect",
           "Transcriber(ModelSettings.self_hosted", "from diarization_utils import diarize"]
    for block in python_blocks():
        assert sum(marker in block for marker in run) == 1, f"a python example no test runs:\n{block[:300]}"
    assert len(python_blocks()) == len(run)


def test_the_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: a broken link, a missing anchor or a page left out of the navigation fails."""
    pytest.importorskip("mkdocs", reason="mkdocs-material is in requirements-dev.txt")
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    configuration = (tmp_path / "site" / "configuration" / "index.html").read_text()
    assert "MAX_BATCH_ITEMS" in configuration and "LIVE_LOOKAHEAD_S" in configuration
    assert len(list((tmp_path / "site").rglob("index.html"))) >= len(PAGES) - 1


def test_the_workbench_index_lists_every_script():
    """bench/README.md names every script under bench/ (the probe's modules as ``probes/``)."""
    index = (ROOT / "bench" / "README.md").read_text()
    scripts = [path for path in (ROOT / "bench").rglob("*") if path.suffix in (".py", ".sh", ".js") and "probes" not in path.parts]
    missing = [str(path.relative_to(ROOT)) for path in scripts if f"`{path.name}`" not in index and f"`{path.relative_to(ROOT)}`" not in index]
    assert not missing, f"bench/README.md does not list: {missing}"


@pytest.mark.parametrize("script", sorted(str(path.relative_to(ROOT)) for group in ("speed", "memory", "quality", "batch")
                                          for path in (ROOT / "bench" / group).glob("*.py")))
def test_each_grouped_script_finds_the_package_and_its_siblings(script):
    """Moved into its group, a script still puts the repository on its path: ``--help`` parses (the
    script without options is only imported)."""
    if script.endswith("live_device_check.py"):
        command = [sys.executable, "-c", f"import runpy, sys; sys.argv = ['x']; runpy.run_path({script!r}, run_name='imported')"]
    else:
        command = [sys.executable, script, "--help"]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr[-2000:]


# Modules other work is changing at the time of writing; their docstrings are trimmed there.
def test_module_docstrings_say_what_and_why_in_a_few_lines():
    """At most 15 lines: the measurements behind a choice belong in the docs, referenced in one line."""
    import ast

    long = []
    for path in [*ROOT.glob("*.py"), *(ROOT / "speaker_transcripts").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        name = str(path.relative_to(ROOT))
        docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
        if len(docstring.strip("\n").splitlines()) > 15:
            long.append(name)
    assert not long, long
