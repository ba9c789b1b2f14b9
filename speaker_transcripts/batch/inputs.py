"""The files a batch job is given: paths, folders (searched recursively for audio), glob
patterns, text manifests of paths, or any URI pyarrow's filesystems read (``s3://``, ``gs://``).

Each file is listed with its size and modification time, which key it for resuming: a file that
changed since it was done is done again. Pure file listing: no torch, no Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyarrow import fs

from speaker_transcripts.pipeline.audio import AUDIO_EXTENSIONS

MANIFEST_EXTENSIONS = frozenset({".txt", ".lst", ".list"})


@dataclass(frozen=True)
class InputFile:
    """One recording: ``path`` absolute, or a URI, as the job reads it."""

    path: str
    size: int
    mtime_ns: int

    @property
    def key(self) -> str:
        """What a finished row is remembered by: the same file, unchanged."""
        return f"{self.path}|{self.size}|{self.mtime_ns}"


class InputError(ValueError):
    """An input that names nothing readable; the message says which and why."""


def expand_inputs(inputs: list[str]) -> list[InputFile]:
    """Every audio file the inputs name, once each, in a stable order (as given, folders sorted)."""
    found: dict[str, InputFile] = {}
    for item in inputs:
        for file in _expand(item, manifests=()):
            found.setdefault(file.path, file)
    return list(found.values())


def _expand(item: str, manifests: tuple[Path, ...]) -> list[InputFile]:
    """``manifests``: the manifests being read that led here (one naming itself, or two each other, is refused)."""
    if "://" in item:
        return _from_filesystem(item)
    path = Path(item).expanduser()
    if any(character in item for character in "*?[") and not path.exists():
        anchor, matches = _glob(path)
        if not matches:
            raise InputError(f"{item}: the pattern matches no file")
        return [file for match in matches for file in _expand_local(match, within=anchor)]
    if not path.exists():
        raise InputError(f"{item}: no such file or folder")
    if path.is_file() and path.suffix.lower() in MANIFEST_EXTENSIONS:
        return _from_manifest(path, manifests)
    return _expand_local(path)


def _glob(pattern: Path) -> tuple[Path, list[Path]]:
    """The folder a pattern searches (its parts before the first wildcard) and what it matches, in
    order, with ``**`` for any depth. pathlib's matching (3.11) does not follow symbolic links to
    folders; ``glob.glob`` did, and a folder linking to its parent never returned (memory grew about
    12 MB a second)."""
    parts = pattern.parts
    fixed = next((index for index, part in enumerate(parts) if any(character in part for character in "*?[")), len(parts))
    anchor = Path(*parts[:fixed]) if fixed else Path(".")
    rest = str(Path(*parts[fixed:]))
    return anchor, sorted(anchor.glob(rest)) if anchor.is_dir() else []


def _expand_local(path: Path, within: Path | None = None) -> list[InputFile]:
    """The audio ``path`` names: itself, or a folder's audio files. What a folder or a pattern finds
    (``within``: the folder the pattern searched) is kept to regular audio files in that folder: a
    link out of it, a device (``/dev/zero``) or a FIFO is skipped, as a name given on its own is not."""
    if path.is_dir():
        return [_local(candidate) for candidate in sorted(candidate for candidate in path.rglob("*") if _found(candidate, path))]
    if within is not None:
        return [_local(path)] if _found(path, within) else []  # a pattern such as calls/* names the audio in it, not its notes
    return [_local(path)]


def _found(candidate: Path, folder: Path) -> bool:
    """Whether a file a search came upon is one to transcribe: audio, a regular file, inside ``folder``."""
    return _is_audio(candidate.name) and candidate.is_file() and folder.resolve() in candidate.resolve().parents


def _from_manifest(manifest: Path, reading: tuple[Path, ...]) -> list[InputFile]:
    """One path or URI a line; blank lines and ``#`` comments skipped; relative paths are relative to the manifest."""
    if manifest.resolve() in reading:
        raise InputError(f"{manifest} names itself, or a manifest that names it: a loop")
    files = []
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        target = entry if "://" in entry or Path(entry).is_absolute() else str(manifest.parent / entry)
        try:
            files += _expand(target, (*reading, manifest.resolve()))
        except InputError as error:
            raise InputError(f"{manifest}, line {number}: {error}") from None
    return files


def _local(path: Path) -> InputFile:
    absolute = path.resolve()
    stat = absolute.stat()
    return InputFile(path=str(absolute), size=stat.st_size, mtime_ns=stat.st_mtime_ns)


def _from_filesystem(uri: str) -> list[InputFile]:
    try:
        filesystem, location = fs.FileSystem.from_uri(uri)
        info = filesystem.get_file_info(location)
        listed = filesystem.get_file_info(fs.FileSelector(location, recursive=True)) if info.type == fs.FileType.Directory else []
    except (OSError, ValueError) as error:
        raise InputError(f"{uri}: cannot be listed ({error})") from None
    if info.type == fs.FileType.File:
        infos = [info]
    elif info.type == fs.FileType.Directory:
        infos = [each for each in listed if each.type == fs.FileType.File and _is_audio(each.base_name)]
    else:
        raise InputError(f"{uri}: no such file or folder")
    scheme = uri.split("://", 1)[0]
    return [
        InputFile(path=f"{scheme}://{each.path}", size=each.size or 0, mtime_ns=each.mtime_ns or 0)
        for each in sorted(infos, key=lambda each: each.path)
    ]


def _is_audio(name: str) -> bool:
    return Path(name).suffix.lower() in AUDIO_EXTENSIONS
