"""The container files as a user builds and runs them (read, not built: a build takes ten minutes and a
registry; ``deploy/container/build-local.sh`` and ``check.sh`` build and try it where podman runs)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONTAINERFILE = (ROOT / "Containerfile").read_text()


def runtime_stage() -> str:
    """The Containerfile's last stage: what the image holds."""
    return CONTAINERFILE.rsplit("\nFROM ", 1)[1]


def test_the_runtime_image_holds_the_installed_package_and_nothing_of_the_checkout():
    copied = " ".join(re.findall(r"^COPY (.*)$", runtime_stage(), flags=re.MULTILINE))
    for left_out in ("samples", "tests", "requirements-dev.txt", "bench", "speaker_transcripts"):
        assert left_out not in copied, copied
    assert "HEALTHCHECK" in runtime_stage() and "USER app" in runtime_stage()


def test_images_are_pinned_by_version():
    base = re.search(r"^ARG BASE=(\S+)$", CONTAINERFILE, flags=re.MULTILINE).group(1)
    assert re.fullmatch(r"debian:\d+\.\d+-slim", base), base
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    for name, service in services.items():
        image = service["image"]
        assert not image.endswith(":latest") or "build" in service, f"{name}: {image} is not pinned"
        assert ":" in image, f"{name}: {image} has no tag"


def test_every_documented_podman_build_keeps_the_health_check():
    """podman's default OCI format has no HEALTHCHECK: ``--format docker`` keeps it."""
    sources = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "Containerfile", *(ROOT / "deploy" / "container").glob("*.sh")]
    lines = [line for path in sources for line in path.read_text().splitlines()]
    builds = [line for line in lines if re.search(r"podman(\[@\]\}\")? build ", line.replace('"${podman[@]}"', "podman"))]
    assert builds and all("--format docker" in line for line in builds), builds
