"""Settings: which models to load (from the environment) and what one request asks for.

``ModelSettings`` is read when the handler is built, never at import, so tests and
programmatic users can set the environment first. ``InferenceConfig`` validates one request's
``parameters``; ``resolve_request`` then checks it against what the loaded models can do.
Nothing here imports torch: every rule is testable on its own.
"""

from __future__ import annotations

import json
import math
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from speaker_transcripts.errors import InvalidRequestError, shown

DEFAULT_ASR_MODEL = "openai/whisper-large-v3"  # the Endpoints handler's default (GPU instances)
# The CLI's and self-hosted server's defaults: embedded models (models.registry), no Hub account needed.
SELF_HOSTED_ASR_MODEL = "whisper-base"
SELF_HOSTED_DIARIZATION_MODEL = "pyannote-campplus"
WHISPER_WINDOW_S = 30.0  # Whisper's encoder sees at most 30 s; longer chunks cannot be decoded


def unset_if_empty(value: Any) -> Any:
    """None for "" and "none": how DIARIZATION_MODEL (or ``--diarization-model none``) turns the CLI's and
    server's embedded default off."""
    return None if isinstance(value, str) and value.strip().lower() in ("", "none") else value


class ModelSettings(BaseSettings):
    """Which models the endpoint loads, from environment variables (case-insensitive).

    Values may be Hub ids, local directories or embedded model names (``models.registry``). Empty
    strings and ``none`` count as unset, because the Inference Endpoints UI sends empty env
    vars for fields a user cleared.
    """

    model_config = SettingsConfigDict(extra="ignore", hide_input_in_errors=True)

    asr_model: str = Field(
        default=DEFAULT_ASR_MODEL,
        description="Whisper model: an embedded name, a Hub id or a local directory. The handler's default is the repository's "
        "own checkpoint, else `openai/whisper-large-v3`; the CLI and server default to the embedded `whisper-base`.",
    )
    assistant_model: str | None = Field(
        default=None,
        description="Draft model for speculative decoding, with Whisper's vocabulary: a full Whisper "
        "(e.g. `distil-whisper/distil-large-v3`) or a decoder-only `WhisperForCausalLM`.",
    )
    diarization_model: str | None = Field(
        default=None,
        description="pyannote pipeline: an embedded name, a Hub id (e.g. `pyannote/speaker-diarization-community-1`) or a local "
        "directory with `config.yaml`; `none` turns diarization off. The CLI and server default to the embedded "
        "`pyannote-campplus`.",
    )
    hf_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("HF_TOKEN", "hf_token"),
        description="Token for gated or private Hub models; never logged or returned.",
    )
    device: str = Field(default="auto", description="`auto`: the first CUDA GPU if any, else the CPU; or e.g. `cpu`, `cuda:1`.")
    dtype: Literal["auto", "float16", "bfloat16", "float32"] = Field(
        default="auto",
        description="`auto`: float16 on CUDA; on a CPU the fast path (int8 decoder, bfloat16 encoder where the CPU has it). "
        "`float32` is the plain reference.",
    )
    speech_gate: bool = Field(
        default=True,
        description="Skip Whisper on audio without speech (Silero VAD, whose weights ship in its wheel): Whisper "
        "hallucinates there.",
    )
    # Longer audio is refused before it is decoded in full: 3 h of 16 kHz float32 is 0.7 GB.
    max_audio_seconds: float = Field(
        default=3 * 3600,
        gt=0,
        description="Longer audio is refused before it is decoded in full (400 on Endpoints, 413 on the server).",
    )
    # Speculative decoding wins while one window is decoded alone, batching wins on long audio.
    assisted_max_seconds: float = Field(
        default=30.0, ge=0, description="`assisted: auto` considers the assistant only up to this duration; 0 disables it."
    )
    warmup: bool = Field(
        default=True,
        description="Transcribe a second of quiet at start-up (each decoding path once), so the first request is not the slow "
        "one.",
    )
    max_batch_items: int = Field(
        default=48,
        ge=1,
        le=4096,
        description="Sequences decoded at once (`batch_size` x `num_beams`, a word-timestamp sequence counting "
        "`WORD_ALIGNMENT_COST`, 4): bounds one request's memory by lowering the batch, never the beams.",
    )
    known_speakers_dir: Path | None = Field(
        default=None,
        description="A voice library (`speaker-transcripts speakers add`): its people are named in every diarized request.",
    )
    max_voices: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="People a voice library may hold: every diarized request compares its speakers with each of them; "
        "enrolling one more is refused.",
    )

    @field_validator("assistant_model", "diarization_model", "hf_token", "known_speakers_dir", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return unset_if_empty(value)

    @field_validator("asr_model", "device", "dtype", mode="before")
    @classmethod
    def _empty_is_default(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return cls.model_fields[info.field_name].default
        return value

    @classmethod
    def for_repository(cls, repository_path: str | Path) -> ModelSettings:
        """Settings for a handler whose repository is mounted at ``repository_path``.

        Inference Endpoints mounts the model repository (``/repository``) and passes its path;
        when that repository itself holds a Whisper checkpoint and ``ASR_MODEL`` is not set,
        the checkpoint in the repository is the model the user deployed.
        """
        settings = cls()
        if "asr_model" not in settings.model_fields_set and is_whisper_checkpoint(repository_path):
            settings = settings.model_copy(update={"asr_model": str(repository_path)})
        return settings

    @classmethod
    def self_hosted(cls, **overrides: Any) -> ModelSettings:
        """Settings for the CLI and the self-hosted server: what the environment sets, and the
        embedded ``whisper-base`` and diarization pipeline for what it leaves unset, so a machine
        without a Hub account or access transcribes and diarizes out of the box. ``overrides`` win
        over both (``self_hosted(warmup=False)`` in a script that transcribes one file)."""
        settings = cls(**overrides)
        # A container on Inference Endpoints gets the model repository mounted at HF_MODEL_DIR (/repository):
        # a Whisper checkpoint there is what the user deployed, as for the handler (for_repository).
        repository = os.environ.get("HF_MODEL_DIR", "")
        asr_default = repository if repository and is_whisper_checkpoint(repository) else SELF_HOSTED_ASR_MODEL
        defaults = {"asr_model": asr_default, "diarization_model": SELF_HOSTED_DIARIZATION_MODEL}
        return settings.model_copy(update={name: value for name, value in defaults.items() if name not in settings.model_fields_set})

    def resolved_device(self, cuda_available: bool) -> str:
        """``auto`` means the first GPU when there is one, otherwise the CPU."""
        if self.device in (None, "auto"):
            return "cuda:0" if cuda_available else "cpu"
        return self.device

    def cpu_fast_path(self, device: str) -> bool:
        """``auto`` on CPU means float32 weights made fast by ``cpu_fast_path.py`` (int8 decoder,
        bfloat16 encoder where the CPU has it); an explicit DTYPE is taken as it is."""
        return self.dtype == "auto" and device == "cpu"

    def resolved_dtype(self, device: str) -> str:
        """``auto`` means float16 on CUDA (fast, and what Whisper was released in), float32 on CPU
        (then sped up by ``cpu_fast_path``)."""
        if self.dtype != "auto":
            return self.dtype
        return "float16" if device.startswith("cuda") else "float32"


class ServerSettings(BaseSettings):
    """Limits and access control of the self-hosted server (``server``), from the environment."""

    model_config = SettingsConfigDict(extra="ignore", hide_input_in_errors=True)

    api_key: SecretStr | None = Field(
        default=None,
        description="When set, inference routes, `/v1/models` and `/metrics` need `Authorization: Bearer <key>` (401 otherwise); "
        "health, readiness and docs stay open.",
    )
    max_upload_mb: float = Field(default=100.0, gt=0, description="Request body limit, base64 included (413).")
    max_queue: int = Field(
        default=16, ge=0, description="Requests waiting behind the running one; beyond that 503 with `Retry-After`."
    )
    max_queued_mb: float = Field(
        default=300.0,
        gt=0,
        description="Audio (bodies, parsed arrays, clips) the requests in progress, queued or uploading may hold in all; 503 "
        "beyond, though a request finding nothing admitted is always taken. Bounds the queue's memory by size, not count.",
    )
    request_timeout_s: float | None = Field(
        default=None, gt=0, description="Answer 504 after this long and stop the work at its next decoder step; unset: no limit."
    )
    # Slow clients: server/connection_guard.py and server/middleware.py (BodyReadTimeout).
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="A request's headers must be complete this long after its first byte; 408 and close otherwise.",
    )
    body_idle_timeout_s: float = Field(
        default=30.0, gt=0, description="A body may pause at most this long between chunks; 408 and close otherwise."
    )
    body_timeout_s: float = Field(
        default=600.0, gt=0, description="A body may take at most this long in all; 408 and close otherwise."
    )
    body_min_rate_kb_s: float = Field(
        default=8.0,
        ge=0,
        description="The average rate a body must keep once `BODY_IDLE_TIMEOUT_S` has passed (kB/s; 0: none), so a body "
        "dripping a byte now and then cannot hold its connection for `BODY_TIMEOUT_S`; 408 and close otherwise.",
    )
    max_connections: int = Field(
        default=256,
        ge=1,
        description="Open connections, counted from `accept` (a TLS handshake included); one more is answered 503 (with "
        "`Retry-After`) and closed before anything is read.",
    )
    max_connections_per_client: int = Field(
        default=64,
        ge=1,
        description="Open connections one client address may hold (503 beyond), so that one client cannot fill "
        "`MAX_CONNECTIONS`.",
    )
    write_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A client that stops reading its answer is dropped once writing to it has stalled this long.",
    )
    allowed_hosts: str = Field(
        default="",
        description="Comma-separated host names this server answers to besides IP addresses, names of one label (`localhost`, "
        "a machine's name) and this machine's name; `*`: any. Checked when `API_KEY` is unset or this is set: another `Host` "
        "is 400 (DNS rebinding).",
    )
    allowed_origins: str = Field(
        default="",
        description="Comma-separated origins (`https://app.example`) whose pages may send requests that change something "
        "(POST, DELETE, a live session); such a request from any other origin is 403.",
    )
    metrics_public: bool = Field(default=False, description="`true` lets a scraper read `/metrics` without `API_KEY`.")
    # Live sessions: server/routers/realtime.py; the automatic choices: live/capacity.py (docs/performance.md, Live).
    live_max_sessions: int | None = Field(
        default=None,
        ge=0,
        le=256,
        description="Live sessions with speakers at once; a text-only one costs two thirds of one (the room of 2 holds 3 "
        "text-only sessions). `auto` (unset): 2 where Whisper's encoder is fast (a GPU, or bfloat16 on a CPU that computes it "
        "natively), 1 on a CPU without; one more is refused with `server_busy` and close code 1013.",
    )
    live_idle_timeout_s: float = Field(
        default=60.0, gt=0, description="A live session that sends no audio for this long is closed (`session_idle`)."
    )
    live_max_session_s: float = Field(
        default=4 * 3600.0,
        gt=0,
        description="A live session older than this finishes its open turn and is closed (`session_expired`).",
    )
    live_max_frame_kb: int = Field(
        default=1024, ge=16, le=16 * 1024, description="The largest WebSocket frame; a bigger one closes that session with 1009."
    )
    live_max_backlog_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Audio a live session has received but not yet processed; past it the server stops reading that socket "
        "until the session catches up (the client is slowed by TCP, not dropped).",
    )
    live_lookahead_s: float | None = Field(
        default=None,
        ge=0,
        le=10,
        description="Audio after a stopped live turn that its final decode hears while the session is the only one open; "
        "0 decodes a turn as soon as it stops. `auto` (unset): 3 where Whisper's encoder is fast, 0 on a CPU without bfloat16.",
    )

    # Browser apps: server/client_secrets.py and server/webrtc.py (docs/live.md, Browser apps).
    realtime_max_client_secrets: int = Field(
        default=1000,
        ge=0,
        le=100_000,
        description="Client secrets (`POST /v1/realtime/client_secrets`) held at once, unexpired; one more is 429. 0 turns "
        "minting off (404).",
    )
    webrtc: bool = Field(
        default=True,
        description="`false` turns WebRTC calls (`POST /v1/realtime/calls`) off (404): the page then records over the "
        "WebSocket, which needs no UDP.",
    )
    webrtc_hosts: str = Field(
        default="",
        description="Comma-separated local IP addresses a WebRTC call receives media on (its host candidates); unset: every "
        "address of this machine's interfaces but loopback. `127.0.0.1` serves browsers on this machine only.",
    )
    webrtc_ports: str = Field(
        default="",
        pattern=r"^\s*(\d{1,5}\s*-\s*\d{1,5})?\s*$",
        description="UDP ports for WebRTC media, `FIRST-LAST` (a call takes one port per address in `WEBRTC_HOSTS`), for a "
        "firewall that opens only those; unset: any free port. A call finding none free is 503.",
    )

    @field_validator("live_max_sessions", "live_lookahead_s", mode="before")
    @classmethod
    def _auto_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() in ("", "auto") else value

    @field_validator("webrtc_ports")
    @classmethod
    def _a_port_range(cls, value: str) -> str:
        if value.strip():
            first, last = (int(part) for part in value.split("-"))
            if not 1 <= first <= last <= 65535:
                raise ValueError(f"{value!r} is no port range: FIRST-LAST, 1 <= FIRST <= LAST <= 65535")
        return value

    @field_validator("api_key", "request_timeout_s", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def webrtc_port_range(self) -> tuple[int, int] | None:
        """``WEBRTC_PORTS`` as (first, last), or None (any free port)."""
        if not self.webrtc_ports.strip():
            return None
        first, last = (int(part) for part in self.webrtc_ports.split("-"))
        return first, last

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_queued_bytes(self) -> int:
        return int(self.max_queued_mb * 1024 * 1024)


def is_whisper_checkpoint(path: str | Path) -> bool:
    """True when ``path`` is a directory holding a transformers Whisper ``config.json``."""
    config_file = Path(path) / "config.json" if str(path) else None
    if config_file is None or not config_file.is_file():
        return False
    try:
        return json.loads(config_file.read_text()).get("model_type") == "whisper"
    except (OSError, ValueError):
        return False


MAX_KNOWN_SPEAKERS = 8  # enrolment clips per request: each is decoded and embedded before diarization
MAX_SPEAKER_NAME_CHARS = 64
MAX_VOICES_CHOSEN = 256  # the voice library's people one request may choose by name
# Labels the service gives anonymous speakers: a known speaker named so would be confused with one.
RESERVED_SPEAKER_NAMES = re.compile(r"SPEAKER_\d+|UNKNOWN", re.IGNORECASE)


# Cyrillic and Greek letters drawn like Latin ones: "Аnna" with a Cyrillic А reads as "Anna".
HOMOGLYPHS = str.maketrans(
    "АВЕКМНОРСТХУЅІЈаеорсхуѕіјԁԛԝΑΒΕΖΗΙΚΜΝΟΡΤΥΧονι",
    "ABEKMHOPCTXYSIJaeopcxysijdqwABEZHIKMNOPTYXovi",
)


def _skeleton(name: str) -> str:
    """A name as a reader takes it: compatibility forms (fullwidth letters) as plain ones, without accents
    and combining marks, Cyrillic and Greek look-alikes as Latin letters, upper-cased, with the letter O
    as the digit 0 after an underscore ("SPEAKER_O1")."""
    bare = "".join(character for character in unicodedata.normalize("NFKD", name) if not unicodedata.combining(character))
    head, _, tail = bare.translate(HOMOGLYPHS).upper().rpartition("_")
    return f"{head}_{tail.replace('O', '0')}" if head else tail


def looks_like(name: str, other: str) -> bool:
    """Whether two names read the same to a person (``_skeleton``): one person's, never two people's."""
    return _skeleton(name) == _skeleton(other)


def speaker_name(value: str) -> str:
    """A person's name as every surface takes it (known speakers, the voice library): NFC, and any run of
    whitespace (a no-break space, a line separator) one space, so names that look alike are one name
    ("Reader A" and "Reader\u00a0A") and no line break reaches a subtitle; ``ValueError`` says what is wrong."""
    name = " ".join(unicodedata.normalize("NFC", value).split())
    if not name:
        raise ValueError("a known speaker's name is empty")
    if len(name) > MAX_SPEAKER_NAME_CHARS:
        raise ValueError(f"a known speaker's name has {len(name)} characters; at most {MAX_SPEAKER_NAME_CHARS}")
    if any(unicodedata.category(character).startswith("C") for character in name):
        raise ValueError("a known speaker's name may not hold control or unassigned characters (line breaks, tabs, ...)")
    if RESERVED_SPEAKER_NAMES.fullmatch(name) or RESERVED_SPEAKER_NAMES.fullmatch(_skeleton(name)):
        raise ValueError(f"{name!r} is, or looks like, how anonymous speakers are labelled; choose another name")
    return name


class KnownSpeaker(BaseModel):
    """A voice to recognise: the name to give it and a short clip of it (base64 or a ``data:`` URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    audio: str = Field(repr=False, min_length=1)

    @field_validator("name")
    @classmethod
    def _usable_name(cls, value: str) -> str:
        return speaker_name(value)


class InferenceConfig(BaseModel):
    """One request's ``parameters``, with the blog handler's names and defaults."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    # "diarize": who spoke when only (the speaker timeline, no speech recognition).
    task: Literal["transcribe", "translate", "diarize"] = "transcribe"
    batch_size: int = Field(default=24, ge=1, le=256)
    # True/False force the choice; "auto" (the default when an assistant is loaded) picks by duration.
    assisted: bool | Literal["auto"] | None = None
    # Long audio: "vad" decodes the speech the voice activity detector finds, in pieces of at most
    # chunk_length_s cut at pauses (long_form.py); "chunked" is the transformers pipeline's own
    # overlapping windows of chunk_length_s over the whole file, kept for comparison.
    long_form: Literal["vad", "chunked"] = "vad"
    chunk_length_s: float = Field(default=WHISPER_WINDOW_S, ge=1, le=WHISPER_WINDOW_S)
    sampling_rate: int = Field(default=16000, ge=1000, le=384000)
    language: str | None = None
    num_speakers: int | None = Field(default=None, ge=1, le=100)
    min_speakers: int | None = Field(default=None, ge=1, le=100)
    max_speakers: int | None = Field(default=None, ge=1, le=100)
    return_timestamps: Literal["segment", "word"] = "segment"
    num_beams: int = Field(default=1, ge=1, le=16)
    # None: diarize whenever a diarization model is loaded; False skips it for this request.
    diarize: bool | None = None
    # How text meets speakers: each word by its own time (default when diarizing), or whole segments.
    attribution: Literal["word", "segment"] | None = None
    # Text Whisper treats as what was said before the audio: spellings, names, style.
    prompt: str | None = Field(default=None, max_length=2000)
    # Voices to name in the transcript (pipeline/speaker_naming.py); diarized speakers matching none stay anonymous.
    known_speakers: tuple[KnownSpeaker, ...] = Field(default=(), max_length=MAX_KNOWN_SPEAKERS)
    # The voice library's people (KNOWN_SPEAKERS_DIR) who may be named here, by name; None: all of them.
    voices: tuple[str, ...] | None = Field(default=None, max_length=MAX_VOICES_CHOSEN)
    # Each diarized speaker's voice embedding in the answer, for matching speakers across files.
    return_speaker_embeddings: bool = False

    @property
    def attributes_words(self) -> bool:
        """Whether this (resolved) request times every word to attribute it to a speaker, even
        when the client asked for segments."""
        return bool(self.diarize) and self.attribution == "word"

    @field_validator("return_timestamps", mode="before")
    @classmethod
    def _true_means_segment(cls, value: Any) -> Any:
        # transformers spells segment-level timestamps ``True``; accept its vocabulary too.
        if value is True:
            return "segment"
        if value is False:
            raise ValueError("timestamps are always returned; choose 'segment' or 'word'")
        return value

    @field_validator("language", mode="before")
    @classmethod
    def _normalise_language(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower().removeprefix("<|").removesuffix("|>")
            return value or None
        return value

    @field_validator("voices")
    @classmethod
    def _voice_names(cls, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if names is None else tuple(dict.fromkeys(speaker_name(name) for name in names))

    @field_validator("known_speakers")
    @classmethod
    def _names_are_unique(cls, speakers: tuple[KnownSpeaker, ...]) -> tuple[KnownSpeaker, ...]:
        seen: dict[str, str] = {}
        for speaker in speakers:
            # compared as RTTM writes them too (spaces as "_"): "Reader A" and "reader_a" would be one speaker there
            key = speaker.name.casefold().replace(" ", "_")
            if key in seen:
                raise ValueError(f"the names {seen[key]!r} and {speaker.name!r} cannot be told apart; each known speaker needs its own")
            seen[key] = speaker.name
        return speakers

    @model_validator(mode="after")
    def _speaker_counts_agree(self) -> InferenceConfig:
        low, high, exact = self.min_speakers, self.max_speakers, self.num_speakers
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_speakers ({low}) is greater than max_speakers ({high})")
        if exact is not None and low is not None and exact < low:
            raise ValueError(f"num_speakers ({exact}) is below min_speakers ({low})")
        if exact is not None and high is not None and exact > high:
            raise ValueError(f"num_speakers ({exact}) is above max_speakers ({high})")
        return self

    @property
    def speaker_hints(self) -> dict[str, int]:
        """The speaker-count hints the client gave, in pyannote's keyword names."""
        hints = {"num_speakers": self.num_speakers, "min_speakers": self.min_speakers, "max_speakers": self.max_speakers}
        return {name: value for name, value in hints.items() if value is not None}


@dataclass(frozen=True)
class ModelCapabilities:
    """What the loaded models can do: the facts request validation needs, without torch."""

    multilingual: bool
    language_codes: frozenset[str]
    language_aliases: Mapping[str, str] = field(default_factory=dict)  # "german" -> "de"
    has_assistant: bool = False
    has_diarization: bool = False
    embeds_speakers: bool = False  # the diarization pipeline has a speaker-embedding model (pyannote's)
    # Whisper's encoder, most of a live decode's cost, runs on a GPU or in bfloat16 on a CPU that computes it
    # natively (AVX-512 BF16, AMX): the machines the live defaults keep two sessions in real time on (live.capacity).
    fast_encoder: bool = False


@dataclass(frozen=True)
class ResolvedRequest:
    """A validated request adjusted to the loaded models, plus what the client should know."""

    config: InferenceConfig
    warnings: list[str]


MAX_UNKNOWN_NAMED = 10  # unknown parameters named one by one in the warnings; the rest are counted
MAX_PROBLEMS_NAMED = 5  # validation problems named in a 400; the rest are counted
# Parameters that hold several items, with their bounds: longer ones are refused before an item is validated.
COLLECTION_BOUNDS = {"known_speakers": MAX_KNOWN_SPEAKERS, "voices": MAX_VOICES_CHOSEN}


def parse_parameters(parameters: Any) -> tuple[InferenceConfig, list[str]]:
    """Validate raw ``parameters``; unknown keys are ignored and reported as warnings."""
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, Mapping):
        raise InvalidRequestError(
            f"'parameters' must be a JSON object, got {type(parameters).__name__}"
        )
    known = InferenceConfig.model_fields
    for name, bound in COLLECTION_BOUNDS.items():  # refused whole, before any item is checked (a 4.9-MB body made a 157-MB 400)
        value = parameters.get(name)
        if isinstance(value, (list, tuple, dict)) and len(value) > bound:
            raise InvalidRequestError(f"parameter {name!r} holds {len(value)} items; at most {bound}")
    unknown = [name for name in parameters if name not in known]
    warnings = [f"unknown parameter {shown(name)} was ignored" for name in unknown[:MAX_UNKNOWN_NAMED]]
    if len(unknown) > MAX_UNKNOWN_NAMED:  # 300,000 unknown keys made a 17-MB answer of warnings
        warnings.append(f"{len(unknown) - MAX_UNKNOWN_NAMED} more unknown parameters were ignored")
    try:
        config = InferenceConfig.model_validate(dict(parameters))
    except ValidationError as error:
        raise InvalidRequestError(_describe(error)) from None
    return config, warnings


def _describe(error: ValidationError) -> str:
    """One line per problem, naming the parameter and the value that was sent; at most
    ``MAX_PROBLEMS_NAMED`` of them (the rest counted), so no answer outgrows the request."""
    problems = []
    items = error.errors(include_url=False)
    for item in items[:MAX_PROBLEMS_NAMED]:
        location = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        if location:
            problems.append(f"parameter {shown(location)}: {message} (got {shown(item['input'])})")
        else:
            problems.append(message)
    if len(items) > MAX_PROBLEMS_NAMED:
        problems.append(f"and {len(items) - MAX_PROBLEMS_NAMED} more problems")
    return "invalid parameters: " + "; ".join(problems)


def resolve_request(config: InferenceConfig, capabilities: ModelCapabilities) -> ResolvedRequest:
    """Check a request against the loaded models; fix what can be fixed and say so."""
    warnings: list[str] = []
    updates: dict[str, Any] = {}

    if config.assisted in (None, "auto"):
        updates["assisted"] = "auto" if capabilities.has_assistant and config.num_beams == 1 else False
    elif config.assisted:
        if not capabilities.has_assistant:
            raise InvalidRequestError(
                "assisted=true needs an assistant model; set ASSISTANT_MODEL on the endpoint or send assisted=false"
            )
        if config.num_beams > 1:
            raise InvalidRequestError("assisted generation is greedy: send num_beams=1 or assisted=false")
        if config.batch_size > 1:
            updates["batch_size"] = 1
            warnings.append(f"assisted generation runs one chunk at a time: batch_size {config.batch_size} was reduced to 1")

    if config.language is not None:
        updates["language"] = _language_code(config.language, capabilities)

    if config.task == "translate" and not capabilities.multilingual:
        raise InvalidRequestError(
            "task='translate' needs a multilingual Whisper model; the loaded model is English-only"
        )

    if config.task == "diarize":
        if not capabilities.has_diarization:
            raise InvalidRequestError("task='diarize' needs a diarization model; set DIARIZATION_MODEL on the endpoint")
        if config.diarize is False:
            raise InvalidRequestError("task='diarize' is diarization alone; do not send diarize=false with it")
    if config.diarize and not capabilities.has_diarization:
        raise InvalidRequestError("diarize=true needs a diarization model; set DIARIZATION_MODEL on the endpoint")
    diarize = capabilities.has_diarization if config.diarize is None else config.diarize
    updates["diarize"] = diarize
    if diarize:
        updates["attribution"] = config.attribution or "word"
    elif config.attribution is not None:
        warnings.append("attribution ignored: this request is not diarized")
        updates["attribution"] = None
    if (config.known_speakers or config.return_speaker_embeddings) and not (diarize and capabilities.embeds_speakers):
        asked = "known_speakers" if config.known_speakers else "return_speaker_embeddings"
        if not capabilities.has_diarization:
            reason = "a diarization model; set DIARIZATION_MODEL on the endpoint"
        elif not diarize:
            reason = "diarization; do not send diarize=false with it"
        else:
            reason = "a diarization pipeline with a speaker-embedding model (a pyannote pipeline)"
        raise InvalidRequestError(f"{asked} needs {reason}")
    if config.speaker_hints and not diarize:
        names = ", ".join(config.speaker_hints)
        reason = "diarize=false" if capabilities.has_diarization else "no diarization model is loaded (set DIARIZATION_MODEL)"
        warnings.append(f"{names} ignored: {reason}")
        updates.update({name: None for name in config.speaker_hints})
    if config.voices is not None and not (diarize and capabilities.embeds_speakers):
        warnings.append("voices ignored: this request names no speakers (it is not diarized, or the pipeline embeds no voices)")
        updates["voices"] = None

    if config.prompt is not None and not config.prompt.strip():
        updates["prompt"] = None

    return ResolvedRequest(config=config.model_copy(update=updates), warnings=warnings)


# Word alignment keeps the alignment heads' cross-attention for every decoder step. Measured on a diarized 10-min
# request (whisper-base, CPU): batch 12 peaked 1.38 GB above the loaded models, batch 24 1.99 GB for 3 % less time.
WORD_ALIGNMENT_COST = 4
# The batch a word-timed decode gets unless the client chose one: each row holds its encoder output, the decoder's
# keys and values over it and its alignment heads' attention. Word-timed ASR of a 10-min file (whisper-base, 2 cores
# with AVX-512 BF16, fresh processes): batch 12 / 8 / 4 peaked 1,100 / 750 / 470 MB above the loaded models in
# 20.6 / 17.5-18.3 / 18.4 s, so 4 costs no time there (a scratch probe; docs/performance.md, "Footprint, round eleven").
WORD_TIMED_BATCH = 4
# The batch a CPU decode without word times gets unless the client chose one: on a 10-min recording with speech
# throughout, batch 24 peaked at 1.37x faster-whisper's batched pipeline, 8 at 1.18x in the same time
# (docs/performance.md, "Memory").
CPU_BATCH = 8
# A beam costs about twice a batch item (bench/memory/request_cost.py, whisper-tiny.en, word timestamps:
# 12 beams on one 30-s window peaked 1.8 GB above idle, 12 batch items of 1-s pieces 0.9 GB).
BEAM_COST = 2


def timed_by_words(parameters: Mapping[str, Any], capabilities: ModelCapabilities) -> dict[str, Any]:
    """``parameters`` for an answer that becomes subtitles: word timestamps when the request
    computes them anyway (``attributes_words``: diarized with word attribution, the default), so
    each cue starts and ends on its words instead of a segment's time shared out by its
    characters. Other requests are left as they are: there word times would cost an alignment
    pass nobody asked for; so is one that will not resolve, for the handler to refuse."""
    try:
        config = resolve_request(parse_parameters(parameters)[0], capabilities).config
    except InvalidRequestError:
        return dict(parameters)
    if config.task == "diarize" or not config.attributes_words:
        return dict(parameters)
    return {**parameters, "return_timestamps": "word"}


WHISPER_TOKENS_PER_WINDOW = 448  # Whisper's decoder context: its token budget for a 30-s window
WHISPER_WINDOW_S = 30.0


def token_budget(window_s: float) -> int | None:
    """``max_new_tokens`` for windows of ``window_s`` seconds: Whisper's own budget (448 tokens
    per 30 s) scaled to the window, plus a margin for the start and timestamp tokens. None for
    full-size windows, which keep Whisper's default. A 1-s window thus stops a looping decode
    after 31 tokens instead of 448: memory per step is the same for a 1-s and a 30-s window
    (the encoder always sees 30 s), so the budget is what bounds it."""
    budget = math.ceil(window_s * WHISPER_TOKENS_PER_WINDOW / WHISPER_WINDOW_S) + 16
    return budget if budget < WHISPER_TOKENS_PER_WINDOW - 16 else None


def bounded_work(config: InferenceConfig, max_batch_items: int, on_cpu: bool = False) -> ResolvedRequest:
    """Keep the sequences decoded at once (``batch_size`` x ``num_beams``) within
    ``MAX_BATCH_ITEMS``, a word-timestamp sequence counting ``WORD_ALIGNMENT_COST`` and a beam
    ``BEAM_COST``: first by
    lowering the batch (it changes speed, and on the CPU fast path a word here and there: its int8
    layers quantise a batch's rows together; the client hears of it only if it chose the batch),
    then, when beams alone exceed the bound, the beams (always with a warning: the search differs).
    A word-timed decode whose client left the batch alone gets ``WORD_TIMED_BATCH``, any other
    ``CPU_BATCH`` ``on_cpu``.

    Measured with whisper-tiny.en (``bench/memory/request_cost.py``): 1-s pieces at batch 256 with word
    timestamps peaked 4.1 GB above the idle server, 1.6 GB bounded; batch 256 with word timestamps
    on 120 s, 2.4 GB, 0.8 GB bounded. With word timestamps every decoder step keeps each beam's
    cross-attention, so 16 beams running to Whisper's 448 tokens held over 1 GB; each beam also
    holds its own copy of the encoder's keys and values."""
    per_sequence = WORD_ALIGNMENT_COST if config.return_timestamps == "word" else 1
    per_item = per_sequence * (BEAM_COST if config.num_beams > 1 else 1)
    warnings = []
    beams = max(1, min(config.num_beams, max_batch_items // per_item))
    if beams < config.num_beams:
        warnings.append(f"num_beams {config.num_beams} was reduced to {beams} to bound memory (MAX_BATCH_ITEMS={max_batch_items})")
    batch = max(1, max_batch_items // (per_item * beams))
    if "batch_size" not in config.model_fields_set and config.return_timestamps == "word":
        batch = min(batch, WORD_TIMED_BATCH)
    elif "batch_size" not in config.model_fields_set and on_cpu:
        batch = min(batch, CPU_BATCH)
    if config.batch_size > batch and "batch_size" in config.model_fields_set:
        warnings.append(f"batch_size {config.batch_size} was reduced to {batch} to bound memory (MAX_BATCH_ITEMS={max_batch_items})")
    if beams == config.num_beams and config.batch_size <= batch:
        return ResolvedRequest(config=config, warnings=[])
    bounded = config.model_copy(update={"num_beams": beams, "batch_size": min(config.batch_size, batch)})
    return ResolvedRequest(config=bounded, warnings=warnings)


def _language_code(language: str, capabilities: ModelCapabilities) -> str:
    code = capabilities.language_aliases.get(language, language)
    if not capabilities.multilingual:
        if code != "en":
            raise InvalidRequestError(f"the loaded model is English-only; language {shown(language)} is not supported")
        return code
    if code not in capabilities.language_codes:
        known = ", ".join(sorted(capabilities.language_codes))
        raise InvalidRequestError(f"unknown language {shown(language)}; this model knows: {known}")
    return code
