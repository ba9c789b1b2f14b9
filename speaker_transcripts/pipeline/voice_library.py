"""A voice library: people enrolled once, named in every recording after (``KNOWN_SPEAKERS_DIR``).

``speaker-transcripts speakers add NAME CLIP...`` embeds a few seconds of a person's voice with the
diarization pipeline's own speaker-embedding model, as a request's known speaker is embedded, and
keeps the result: a JSON file per person holding the name, the embedding (the mean direction of the
clips' embeddings), how many clips made it, and the model and dimension it belongs to. Embeddings
are only comparable within one model, so a library is read for the model that is loaded: a voice
made with another model (or of another dimension) is left out with a warning to enrol it again,
never compared. A clip is embedded once, when it is added, not per file or per request.

Pure file handling and numpy: no torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speaker_transcripts.config import looks_like
from speaker_transcripts.errors import InvalidRequestError

logger = logging.getLogger(__name__)
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Voice:
    """One enrolled person."""

    name: str
    model: str
    embedding: np.ndarray
    clips: int
    telephone: np.ndarray | None = None  # the clips embedded through a telephone band (pipeline/bandwidth.py)

    @property
    def dimension(self) -> int:
        return len(self.embedding)


class VoiceLibrary:
    """The voices in ``folder`` (created on the first ``add``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).expanduser()

    def _file(self, name: str) -> Path:
        """A person's file: named by a digest of the name (any name is a safe file name that way)."""
        return self.folder / f"{hashlib.sha256(name.casefold().encode()).hexdigest()[:20]}.json"

    def add(
        self, name: str, embeddings: Sequence[np.ndarray], model: str, telephone: Sequence[np.ndarray] | None = None,
        max_voices: int | None = None,
    ) -> Voice:
        """Keep ``name``'s voice: the mean direction of ``embeddings`` (one per clip), and of
        ``telephone`` (the same clips through a telephone band) for telephone recordings; it
        replaces any voice of that name. Written to a temporary file and renamed, so a reader
        never sees half of it. A name that only looks like an enrolled one ("Аnna" with a Cyrillic
        А beside "Anna"), and a new name beyond ``max_voices``, are the client's to fix."""
        self.check_writable()
        self.check_room(name, max_voices)
        voice = Voice(name=name, model=model, embedding=_mean_direction(embeddings), clips=len(embeddings),
                      telephone=_mean_direction(telephone) if telephone else None)
        target = self._file(name)
        data = {"version": FORMAT_VERSION, "name": name, "model": model, "dimension": voice.dimension, "clips": voice.clips,
                "embedding": [round(float(v), 7) for v in voice.embedding]}
        if voice.telephone is not None:
            data["telephone_embedding"] = [round(float(v), 7) for v in voice.telephone]
        # A temporary file of this writer's own: two enrolments of one name at once each write theirs whole and
        # the last rename wins (a shared temporary name let one rename the other's half-written file, or fail).
        with tempfile.NamedTemporaryFile("w", dir=self.folder, suffix=".partial", delete=False) as temporary:
            temporary.write(json.dumps(data))
        os.replace(temporary.name, target)
        return voice

    def check_writable(self) -> None:
        """Create the folder if need be; a folder that cannot be made or written is the user's to fix, said in one line."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.folder):
                pass
        except OSError as error:
            raise InvalidRequestError(f"the voice library {self.folder} cannot be written ({error.strerror or error})") from None

    def check_room(self, name: str, max_voices: int | None = None) -> None:
        """Refuse ``name`` where it would be a second person who reads like an enrolled one, or one
        person too many; the same name (any case) is a replacement, always allowed."""
        enrolled = [voice.name for voice in self.voices()]
        if any(other.casefold() == name.casefold() for other in enrolled):
            return
        twin = next((other for other in enrolled if looks_like(other, name)), None)
        if twin is not None:
            raise InvalidRequestError(f"{name!r} looks like {twin!r}, who is enrolled: spell it as {twin!r} to replace "
                                      "their voice, or choose a name that reads differently")
        if max_voices is not None and len(enrolled) >= max_voices:
            raise InvalidRequestError(f"the voice library {self.folder} holds {len(enrolled)} people, its limit (MAX_VOICES): "
                                      "remove someone first")

    def remove(self, name: str) -> bool:
        """Forget ``name``; False when there was no such voice."""
        target = self._file(name)
        if not target.exists():
            return False
        target.unlink()
        return True

    def voices(self) -> list[Voice]:
        """Every voice in the library, by name (files that are not voices of this format are skipped, with a warning)."""
        found = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                if not path.is_file():  # a FIFO would hold the server's start-up forever
                    raise ValueError("not a regular file")
                data = json.loads(path.read_text())
                if data.get("version") != FORMAT_VERSION:
                    raise ValueError(f"format {data.get('version')!r}")
                embedding = _vector(data["embedding"], data["dimension"])
                telephone = _vector(data["telephone_embedding"], data["dimension"]) if "telephone_embedding" in data else None
                found.append(Voice(name=str(data["name"]), model=str(data["model"]), embedding=embedding, clips=int(data["clips"]),
                                   telephone=telephone))
            except (OSError, ValueError, KeyError, TypeError) as error:
                logger.warning("voice library %s: %s is not a voice (%s); left out", self.folder, path.name, error)
        return sorted(found, key=lambda voice: voice.name.casefold())

    def for_model(self, model: str, dimension: int | None = None) -> dict[str, Voice]:
        """The voices made with ``model`` (and ``dimension``), by name; the others are left out, with a warning."""
        usable = {}
        for voice in self.voices():
            if voice.model != model or (dimension is not None and voice.dimension != dimension):
                logger.warning("voice library: %r was enrolled with %s (%d values), not %s; enrol it again to name it",
                               voice.name, voice.model, voice.dimension, model)
                continue
            usable[voice.name] = voice
        return usable


class FollowedLibrary:
    """A library's voices for one model, read again whenever its folder changes: a person added or
    removed by ``speakers add``/``remove``, another server or ``DELETE /v1/voices`` is seen by the
    next request, without a restart. The check lists the folder's files (name, inode, modification
    time): far cheaper than the request it precedes."""

    def __init__(self, folder: Path, model: str, dimension: int | None) -> None:
        self.library, self.model, self.dimension = VoiceLibrary(folder), model, dimension
        self._stamp: tuple | None = None
        self._voices: dict[str, Voice] = {}

    def voices(self) -> dict[str, Voice]:
        stamp = self._stamp_now()
        if stamp != self._stamp:
            self._voices, self._stamp = self.library.for_model(self.model, self.dimension), stamp
        return self._voices

    def _stamp_now(self) -> tuple:
        try:
            with os.scandir(self.library.folder) as entries:
                # a voice is replaced by renaming a new file over it: a new inode, whatever its time and size
                return tuple(sorted((entry.name, entry.inode(), entry.stat().st_mtime_ns) for entry in entries if entry.name.endswith(".json")))
        except OSError:  # no folder (yet): no voices
            return ()


def _mean_direction(vectors: Sequence[np.ndarray]) -> np.ndarray:
    units = [np.asarray(vector, dtype=np.float64) / np.linalg.norm(vector) for vector in vectors]
    mean = np.mean(units, axis=0)
    return (mean / np.linalg.norm(mean)).astype(np.float32)


def _vector(values: object, dimension: int) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    if vector.ndim != 1 or len(vector) != dimension or not np.isfinite(vector).all():
        raise ValueError("its embedding does not match its dimension")
    return vector
