"""The package as a user installs it: a wheel built by ``pip wheel``, installed by pip, whose
console command transcribes the sample from a working directory outside the clone."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "speaker_transcripts"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=600,
    )
    (built,) = out.glob("speaker_transcripts-*.whl")
    return built


def requirements_txt() -> list[Requirement]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [Requirement(line.split("#")[0]) for line in lines if line.split("#")[0].strip()]


def test_the_wheel_holds_every_module_the_command_and_requirements_txt(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(name.rsplit("/", 1)[0] for name in names if name.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    modules = {str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    page = {str(path.relative_to(ROOT)) for path in (PACKAGE / "server" / "static").iterdir()}  # GET / from the installed package
    assert page and page <= names, sorted(page - names)
    assert "speaker-transcripts = speaker_transcripts.cli:run" in entry_points
    # one source of truth: the wheel's dependencies are requirements.txt's, pins included
    declared = {str(Requirement(value)) for value in metadata.get_all("Requires-Dist") if "extra ==" not in value}
    assert declared == {str(requirement) for requirement in requirements_txt()}


def test_the_installed_wheel_transcribes_the_sample_from_outside_the_clone(wheel, tmp_path):
    """Installed by pip into a prefix of its own (its dependencies are this venv's), the console
    command runs from another directory, on the embedded models, with speakers."""
    prefix = tmp_path / "prefix"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--ignore-installed", "-q", "--prefix", str(prefix), str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (site_packages,) = prefix.glob("lib/python*/site-packages")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sample = elsewhere / "two-readers.wav"
    sample.write_bytes((ROOT / "samples" / "two-readers.wav").read_bytes())
    environment = {**os.environ, "PYTHONPATH": str(site_packages), "DIARIZATION_MODEL": "pyannote-campplus"}

    def command(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(prefix / "bin" / "speaker-transcripts"), *arguments], cwd=elsewhere, env=environment,
                              capture_output=True, text=True, timeout=600, check=False)

    where = subprocess.run([sys.executable, "-c", "import speaker_transcripts; print(speaker_transcripts.__file__)"],
                           cwd=elsewhere, env=environment, capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(site_packages)), "the wheel's copy, not the clone's, is the one imported"
    completed = command("transcribe", sample.name, "--asr-model", "whisper-tiny.en", "--format", "txt")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert [line.split(":")[0] for line in completed.stdout.splitlines()] == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_00"]
    listing = command("models", "list")
    assert listing.returncode == 0 and "whisper-tiny.en" in listing.stdout
