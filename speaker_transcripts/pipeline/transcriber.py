"""The orchestrator: audio in, speaker-attributed transcript out, on models loaded once.

Every surface runs this one object: the Inference Endpoints entry (``handler.py``), the server, the
CLI, the evaluation harness and the benchmarks. A request is the Endpoints payload
``{"inputs": <base64 | raw bytes | {"array", "sampling_rate"}>, "parameters": {...}}`` and the answer
is ``{"text", "chunks", "speakers", "language", "duration", "decoding", "warnings"}``, plus
``diarization`` (the speaker timeline, overlaps kept) when diarized and ``speaker_embeddings`` when
asked for (docs/api.md). The stages run in order: decode the audio, find the speech (Silero), cut it
into pieces, decode them with Whisper while pyannote diarizes beside it, then attribute words to
speakers. A request the client can fix raises ``InvalidRequestError`` (a ``ValueError``: Endpoints
answers 400).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from speaker_transcripts.config import (
    InferenceConfig,
    KnownSpeaker,
    ModelCapabilities,
    ModelSettings,
    bounded_work,
    parse_parameters,
    resolve_request,
)
from speaker_transcripts.errors import AudioTooLongError, InvalidRequestError, RequestAbandoned
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, DecodedAudio, decode_inputs
from speaker_transcripts.pipeline.bandwidth import is_narrowband, telephone_band
from speaker_transcripts.pipeline.decoding_policy import DecodingPolicy
from speaker_transcripts.pipeline.diarization import (
    UNKNOWN_SPEAKER,
    Diarization,
    DiarizationPipeline,
    SpeakerSegment,
    assign_speakers,
    diarize,
    group_by_speaker,
    load_diarization_pipeline,
    speaker_embedder,
    with_overlaps,
    word_speakers,
)
from speaker_transcripts.pipeline.heap import release_gpu_library_pages, return_freed_memory, trimmed_every
from speaker_transcripts.pipeline.long_form import MAX_PAUSE_S, PIECE_PAD_S, Piece, plan_pieces
from speaker_transcripts.pipeline.phrase_speakers import PHRASE_MIN_S, Checked, checked, holds_two_voices
from speaker_transcripts.pipeline.speaker_count import count_doubts
from speaker_transcripts.pipeline.speaker_naming import (
    MAX_REFERENCE_S,
    MIN_REFERENCE_SPEECH_S,
    NameMatch,
    match_names,
    naming_threshold,
    speech_of,
    unmatched_warnings,
)
from speaker_transcripts.pipeline.transcript import Chunk, group_words
from speaker_transcripts.pipeline.voice_library import FollowedLibrary, Voice, VoiceLibrary

if TYPE_CHECKING:
    import numpy as np

    from speaker_transcripts.pipeline.speech_gate import SpeechGate

NO_SPEECH = "no speech detected"
# Gives a diarization's speakers the names of the voices they match, and says how each requested name fared.
Namer = Callable[[Diarization], tuple[Diarization, list[NameMatch]]]
logger = logging.getLogger(__name__)  # a line per model loaded; the CLI shows it on stderr, the server in its log


class Transcriber:
    """Whisper (+ optional assistant) and optional pyannote, loaded once at start-up."""

    def __init__(self, settings: ModelSettings) -> None:
        """``settings`` name the models to load: the environment's for Inference Endpoints
        (``ModelSettings.for_repository``), the CLI's and server's own for those surfaces."""
        # Imported here so that importing the orchestrator (and its pure helpers) needs no torch.
        from speaker_transcripts.models import registry
        from speaker_transcripts.pipeline.asr import SpeechRecognizer
        from speaker_transcripts.pipeline.speech_gate import SpeechGate

        # ``configured`` names the models as the user did; ``settings`` has embedded names as cache folders.
        self.configured = settings
        self.settings = registry.prepare(self.configured)
        started = time.perf_counter()
        self.recognizer = SpeechRecognizer(self.settings)
        assistant = f" with assistant {self.configured.assistant_model}" if self.recognizer.assistant is not None else ""
        logger.info("%s: speech recognition%s on %s (%s), loaded in %.1f s", self.configured.asr_model, assistant,
                    self.recognizer.device, self.recognizer.precision, time.perf_counter() - started)
        self.diarization_pipeline: DiarizationPipeline | None = None
        if self.settings.diarization_model:
            started = time.perf_counter()
            self.diarization_pipeline = load_diarization_pipeline(self.settings, self.recognizer.device)
            logger.info("%s: diarization on %s, loaded in %.1f s", self.configured.diarization_model,
                        self.recognizer.device, time.perf_counter() - started)
        # People enrolled once (KNOWN_SPEAKERS_DIR), named in every diarized request beside the request's own clips.
        self._library: FollowedLibrary | None = None
        if self.settings.known_speakers_dir is not None and self.diarization_pipeline is not None:
            dimension = getattr(getattr(self.diarization_pipeline, "_embedding", None), "dimension", None)
            self._library = FollowedLibrary(self.settings.known_speakers_dir, self.configured.diarization_model, dimension)
            logger.info("voice library %s: %d voices", self.settings.known_speakers_dir, len(self.voices))
        # Silero finds the speech for long-form decoding; SPEECH_GATE decides whether audio
        # where it finds none is answered "no speech" (default) or decoded whole anyway.
        self.speech_gate = SpeechGate()
        # One request at a time on the shared models: the pipeline and pyannote keep per-call state.
        self._lock = threading.Lock()
        self._diarizer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="diarization")
        self.decoding_policy = DecodingPolicy(self.settings.assisted_max_seconds)
        if self.settings.warmup:
            self.recognizer.warm_up()
        return_freed_memory()  # what loading (float16 weights made float32, int8 copies) and the warm-up freed
        release_gpu_library_pages()  # torch's CUDA libraries, read in by importing it, where no GPU can run them

    @property
    def capabilities(self) -> ModelCapabilities:
        """What the loaded models can do; diarization follows whatever the seam holds now."""
        pipeline = self.diarization_pipeline
        return replace(
            self.recognizer.capabilities,
            has_diarization=pipeline is not None,
            embeds_speakers=pipeline is not None and speaker_embedder(pipeline) is not None,
        )

    def __call__(
        self,
        data: Any,
        on_progress: Callable[[float], None] | None = None,
        on_segment: Callable[[Chunk], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_stage: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Serve one request. ``on_progress`` (seconds of audio decoded so far) feeds progress bars;
        ``on_segment`` receives Whisper's chunks as they are decoded, before speakers are known
        (for streaming responses); ``should_stop`` saying yes (client gone, deadline passed) ends
        the work early with ``RequestAbandoned``, also while it waits for the models; ``on_stage``
        hears what is being waited on ("finding speech", "transcribing", "diarizing")."""
        if not isinstance(data, Mapping) or "inputs" not in data:
            raise InvalidRequestError('the request body must be a JSON object with "inputs" (base64 audio) and optional "parameters"')
        config, warnings = parse_parameters(data.get("parameters"))
        resolved = resolve_request(config, self.capabilities)
        config, warnings = resolved.config, warnings + resolved.warnings
        self.chosen_voices(config.voices)  # a name not in the library is refused before the audio is decoded
        audio = decode_inputs(data["inputs"], config.sampling_rate, self.settings.max_audio_seconds, should_stop)
        clips = {speaker.name: enrolment_speech(speaker.name, speaker.audio, self.speech_gate, should_stop) for speaker in config.known_speakers}
        with self._lock:
            if should_stop is not None and should_stop():
                raise RequestAbandoned("the request was abandoned while it waited for the models")
            try:
                stage = on_stage or (lambda _: None)
                with trimmed_every():  # the heap its stages free, while they run (heap.trimmed_every)
                    return self._transcribe(audio, config, warnings, clips, on_progress, on_segment, should_stop, stage)
            finally:
                return_freed_memory()

    def _transcribe(
        self,
        audio: DecodedAudio,
        config: InferenceConfig,
        warnings: list[str],
        clips: dict[str, np.ndarray],
        on_progress: Callable[[float], None] | None,
        on_segment: Callable[[Chunk], None] | None,
        should_stop: Callable[[], bool] | None,
        on_stage: Callable[[str], None],
    ) -> dict[str, Any]:
        duration = round(audio.duration, 3)
        if config.task == "diarize":
            on_stage("diarizing")  # who spoke when, and nothing else: no speech recognition runs
            found, name = self._diarize_for_naming(audio.samples, config, clips, should_stop)
            found, matches = name(found)
            warnings = warnings + _speaker_count_warnings(config, found) + unmatched_warnings(matches)
            return _response("", [], [], None, duration, warnings, "none") | self._diarization_answer(found, matches, config)
        auto = config.assisted == "auto"
        config = self._decoding_for(config, duration)
        on_stage("finding speech")
        if config.long_form == "vad":
            pieces = self._speech_pieces(audio.samples, config)
            silent = pieces is None
        else:
            pieces = None
            silent = self.settings.speech_gate and not self.speech_gate.contains_speech(audio.samples)
        if silent and self.settings.speech_gate:
            response = _response("", [], [], config.language, duration, warnings + [NO_SPEECH], "none")
            return response | (
                self._diarization_answer(Diarization([], []), [NameMatch(name, None, None) for name in clips], config)
                if config.diarize
                else {}
            )
        # Word-level attribution needs word times even when the client asked for segments.
        asr_config = config.model_copy(update={"return_timestamps": "word"}) if config.attributes_words else config
        bounded = bounded_work(asr_config, self.settings.max_batch_items, on_cpu=self.recognizer.device == "cpu")
        asr_config, warnings = bounded.config, warnings + bounded.warnings
        # Diarization runs beside ASR: on 2 CPU cores (59-s conversation, full-size embedding model)
        # 52.9 s overlapped against 59.0 s one after the other (bench/speed/diarization_overlap.py).
        # Diarization stops at its next step when the request is abandoned or ASR has failed.
        asr_failed = threading.Event()
        diarization = (
            self._diarizer.submit(
                self._diarize_for_naming, audio.samples, config, clips,
                lambda: asr_failed.is_set() or (should_stop is not None and should_stop()),
            )
            if config.diarize and self.diarization_pipeline is not None
            else None
        )
        started = time.perf_counter()
        on_stage("transcribing")
        try:
            transcript = self.recognizer.transcribe(
                audio.samples, asr_config, duration, on_progress, pieces, on_segment, should_stop
            )
        except BaseException:
            asr_failed.set()
            if diarization is not None:  # the next request must find pyannote idle; ASR's error is the one to raise
                wait([diarization])
            raise
        if diarization is not None and not diarization.done():
            on_stage("diarizing")  # speech recognition is done; the speaker turns are not yet
        found, matches, spread = None, [], None
        if diarization is not None:
            found, name = diarization.result()
            if asr_config.return_timestamps == "word":
                check = self._checked_by_phrases(found, transcript.chunks, audio.samples, config)
                found, spread = check.diarization, check.spread
            found, matches = name(found)
        warnings = warnings + _speaker_count_warnings(config, found, spread) + unmatched_warnings(matches)
        if auto:
            self.decoding_policy.record(bool(config.assisted), duration, time.perf_counter() - started)
        chunks, speakers, warnings = self._attribute(transcript.chunks, found, config, asr_config, warnings)
        decoding = "assisted" if config.assisted else f"batched (batch_size {asr_config.batch_size})"
        response = _response(transcript.text, chunks, speakers, transcript.language, duration, warnings, decoding)
        return response | (self._diarization_answer(found, matches, config) if found is not None else {})

    def _checked_by_phrases(self, found: Diarization, words: list[Chunk], samples: np.ndarray, config: InferenceConfig) -> Checked:
        """The speakers checked against the transcript's phrases (``phrase_speakers.py``): a voice that
        diarization heard as part of another's is split off. New speakers only where the client left
        room for them (no ``num_speakers``, under ``max_speakers``)."""
        embed = speaker_embedder(self.diarization_pipeline) if self.diarization_pipeline is not None else None
        if embed is None or not words:
            return Checked(found)
        hints = config.speaker_hints
        room = "max_speakers" not in hints or len(found.speakers) < hints["max_speakers"]
        may_add = "num_speakers" not in hints and room
        return checked(found, words, samples, SAMPLING_RATE, embed, may_add)

    def _diarization_answer(self, found: Diarization, matches: list[NameMatch], config: InferenceConfig) -> dict[str, Any]:
        """``diarization``, the speaker timeline as found (several speakers at once where they
        overlap); with known speakers, how each clip fared (``known_speakers``: the closest
        similarity, whether it named a voice); when asked, ``speaker_embeddings``: each speaker's
        voice for matching speakers across files (cosine similarity, docs/voices.md)."""
        answer: dict[str, Any] = {"diarization": [turn.to_dict() for turn in found.timeline]}
        if config.known_speakers:
            answer["known_speakers"] = [
                {"name": match.name, "named": match.speaker is not None,
                 "similarity": None if match.similarity is None else round(match.similarity, 3)}
                for match in matches
            ]
        if config.return_speaker_embeddings:
            answer["speaker_embeddings"] = {
                "model": self.configured.diarization_model,
                "metric": "cosine",
                "dimension": next((len(vector) for vector in found.embeddings.values()), 0),
                "speakers": {label: [round(float(value), 6) for value in vector] for label, vector in found.embeddings.items()},
            }
        return answer

    @property
    def beside(self) -> ThreadPoolExecutor:
        """The thread diarization runs in beside Whisper (on the other core); idle unless the
        models are held, so the holder of ``exclusive()`` may use it."""
        return self._diarizer

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The models to the caller alone for a while: a live session's decode or diarization
        step (``live/session.py``) takes turns on them with file requests, which hold them for
        their whole run."""
        with self._lock:
            yield

    def _embedder(self, what_needs: str) -> Callable[[np.ndarray], np.ndarray]:
        """The pipeline's speaker embedder, or a 400 saying that ``what_needs`` one."""
        embed = speaker_embedder(self.diarization_pipeline) if self.diarization_pipeline is not None else None
        if embed is None:
            raise InvalidRequestError(f"{what_needs} a diarization pipeline with a speaker-embedding model (a pyannote pipeline)")
        return embed

    def voice_embeddings(self, speakers: Sequence[KnownSpeaker]) -> dict[str, np.ndarray]:
        """Each known speaker's voice as the diarization pipeline embeds speakers: the clip decoded
        and checked like a request's (``InvalidRequestError`` naming the speaker), cut to its speech."""
        embed = self._embedder("known speakers need")
        clips = {speaker.name: enrolment_speech(speaker.name, speaker.audio, self.speech_gate) for speaker in speakers}
        with self._lock:
            return {name: embed(clip) for name, clip in clips.items()}


    def _diarize_for_naming(
        self, samples: np.ndarray, config: InferenceConfig, clips: dict[str, np.ndarray], should_stop: Callable[[], bool] | None
    ) -> tuple[Diarization, Namer]:
        """Diarize, and embed the enrolment clips while the pipeline's models are at hand (they serve
        one call at a time); returns the speakers found and a function giving speakers who match a
        clip (or a voice of the library) its name, applied once the transcript's phrase check has
        had its say, so that a voice it splits off can be named too."""
        found = diarize(self.diarization_pipeline, samples, SAMPLING_RATE, config.speaker_hints, should_stop)
        embed = speaker_embedder(self.diarization_pipeline)
        chosen = self.chosen_voices(config.voices)
        if not (clips or chosen) or embed is None:
            return found, lambda speakers: (speakers, [])
        # A telephone recording is compared with the clips heard through its band (pipeline/bandwidth.py).
        telephone = is_narrowband(samples)
        own = {name: embed(telephone_band(clip) if telephone else clip) for name, clip in clips.items()}
        references = {**self.library_for(telephone, chosen), **own}  # a request's clip wins over the library's

        def name(speakers: Diarization) -> tuple[Diarization, list[NameMatch]]:
            matches = match_names(speakers.embeddings, references, naming_threshold(telephone))
            renamed = speakers.renamed({match.speaker: match.name for match in matches if match.speaker is not None})
            return renamed, [match for match in matches if match.name in clips]  # the library's voices are not the request's to hear about

        return found, name

    @property
    def voices(self) -> dict[str, Voice]:
        """The voice library's people (``KNOWN_SPEAKERS_DIR``) by name, as its folder holds them now."""
        return self._library.voices() if self._library is not None else {}

    @property
    def library(self) -> dict[str, np.ndarray]:
        """The enrolled voices (``KNOWN_SPEAKERS_DIR``) as enrolled, by name."""
        return self.library_for(telephone_band=False)

    def library_for(self, telephone_band: bool, chosen: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """The enrolled voices by name (those ``chosen``, else all), for a telephone-band recording or a
        wideband one; a voice enrolled before telephone-band embeddings were kept is compared as it was enrolled."""
        voices = self.voices if chosen is None else {name: self.voices[name] for name in chosen}
        return {name: voice.telephone if telephone_band and voice.telephone is not None else voice.embedding for name, voice in voices.items()}

    def chosen_voices(self, names: Sequence[str] | None) -> list[str]:
        """The library's people a request chose (``voices``; None: everyone), as enrolled; a name that
        is not enrolled is the client's to fix (400)."""
        if names is None:
            return list(self.voices)
        by_key = {name.casefold(): name for name in self.voices}
        missing = [name for name in names if name.casefold() not in by_key]
        if missing:
            where = "this server keeps no voice library (KNOWN_SPEAKERS_DIR)" if self.settings.known_speakers_dir is None else (
                "its voice library holds no such person; GET /v1/voices lists them")
            raise InvalidRequestError(f"voices: {', '.join(repr(name) for name in missing[:5])} not enrolled: {where}")
        return [by_key[name.casefold()] for name in names]

    def enrol(self, name: str, audio: Any, should_stop: Callable[[], bool] | None = None) -> Voice:
        """Keep ``name``'s voice from one clip in the server's voice library (as ``speakers add`` does) and
        name them in every request from now on; the clip is checked and cut to its speech as a known speaker's is."""
        if self.settings.known_speakers_dir is None:
            raise InvalidRequestError("this server keeps no voice library: start it with KNOWN_SPEAKERS_DIR set to a folder")
        embed = self._embedder("enrolling a voice needs")
        library = VoiceLibrary(self.settings.known_speakers_dir)
        library.check_writable()
        library.check_room(name, self.settings.max_voices)  # before the clip is decoded and embedded
        speech = enrolment_speech(name, audio, self.speech_gate, should_stop)
        with self._lock:
            check_one_voice(name, speech, embed)
            voice = library.add(name, [embed(speech)], self.configured.diarization_model, telephone=[embed(telephone_band(speech))],
                                max_voices=self.settings.max_voices)
        logger.info("voice library %s: enrolled a voice (%d voices)", library.folder, len(self.voices))
        return voice

    def forget(self, name: str) -> bool:
        """Remove ``name`` (any case) from the server's voice library, as ``speakers remove`` does; False
        when no such person is enrolled."""
        if self.settings.known_speakers_dir is None:
            raise InvalidRequestError("this server keeps no voice library: start it with KNOWN_SPEAKERS_DIR set to a folder")
        removed = VoiceLibrary(self.settings.known_speakers_dir).remove(name)
        logger.info("voice library %s: %d voices", self.settings.known_speakers_dir, len(self.voices))
        return removed

    @staticmethod
    def _attribute(
        chunks: list[Chunk],
        found: Diarization | None,
        config: InferenceConfig,
        asr_config: InferenceConfig,
        warnings: list[str],
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        """Speakers for the transcript, and the chunks in the granularity the client asked for:
        words labelled one by one (word-level attribution) or Whisper's segments attributed whole."""
        chunk_speakers: list[str] | None = None
        speakers: list[SpeakerSegment] = []
        if found is not None and chunks:
            turns = found.turns
            if not turns:
                warnings = warnings + [f"diarization found no speaker turns; text attributed to {UNKNOWN_SPEAKER}"]
            if asr_config.return_timestamps == "word":
                chunk_speakers = word_speakers(chunks, turns)
                speakers = group_by_speaker(chunks, chunk_speakers)
            else:
                speakers = assign_speakers(chunks, turns)
            speakers = with_overlaps(speakers, found.timeline)
        if asr_config.return_timestamps != config.return_timestamps:  # words were only for attribution
            chunks, chunk_speakers = group_words(chunks, chunk_speakers), None
        elif config.return_timestamps == "segment":  # Whisper's own segments: no leading space, as grouped ones
            chunks = [replace(chunk, text=chunk.text.strip()) for chunk in chunks]
        chunk_dicts = [chunk.to_dict() for chunk in chunks]
        if chunk_speakers is not None:
            chunk_dicts = [{**chunk, "speaker": speaker} for chunk, speaker in zip(chunk_dicts, chunk_speakers, strict=True)]
        return chunk_dicts, [segment.to_dict() for segment in speakers], warnings

    def _speech_pieces(self, samples: np.ndarray, config: InferenceConfig) -> list[Piece] | None:
        """The speech-aligned pieces to decode (``long_form="vad"``); None when there is no speech
        (with SPEECH_GATE off the whole file is then decoded in the pipeline's chunks)."""
        window = int(config.chunk_length_s * SAMPLING_RATE)
        pad = int(PIECE_PAD_S * SAMPLING_RATE)
        regions = self.speech_gate.speech_regions(samples, config.chunk_length_s - 2 * PIECE_PAD_S)
        max_pause = int(MAX_PAUSE_S * SAMPLING_RATE)
        return plan_pieces(regions, len(samples), window, pad, max_pause) if regions else None

    def _decoding_for(self, config: InferenceConfig, duration: float) -> InferenceConfig:
        """Settle ``assisted="auto"`` with the decoding policy (see ``decoding_policy.py``)."""
        if config.assisted != "auto":
            return config
        if self.decoding_policy.choose(duration):
            return config.model_copy(update={"assisted": True, "batch_size": 1})
        return config.model_copy(update={"assisted": False})


def enrolment_speech(name: str, audio: Any, speech_gate: SpeechGate, should_stop: Callable[[], bool] | None = None) -> np.ndarray:
    """A known speaker's clip (``audio``: base64 or file bytes), decoded like any upload, as its
    speech alone; a clip that is undecodable, too long or holds too little speech is the client's
    to fix (400). The CLI runs it on the command line's clips before any model loads, from the
    files' bytes (a 100-MB file as base64 took 914 MB to refuse)."""
    try:
        clip = decode_inputs(audio, SAMPLING_RATE, MAX_REFERENCE_S, should_stop)
    except AudioTooLongError:
        raise InvalidRequestError(
            f"known speaker {name!r}: the clip is longer than {MAX_REFERENCE_S:g} s; send a few seconds of this speaker alone"
        ) from None
    except InvalidRequestError as error:
        raise InvalidRequestError(f"known speaker {name!r}: {error}") from None
    speech = speech_of(clip.samples, speech_gate.speech_regions(clip.samples, MAX_REFERENCE_S))
    if len(speech) < MIN_REFERENCE_SPEECH_S * SAMPLING_RATE:
        raise InvalidRequestError(
            f"known speaker {name!r}: the clip holds {len(speech) / SAMPLING_RATE:.1f} s of speech; "
            f"at least {MIN_REFERENCE_SPEECH_S:g} s of this speaker talking is needed"
        )
    return speech


ENROLMENT_PIECE_S = 1.5  # an enrolment clip is embedded in pieces this long to hear whether it holds one voice
ENROLMENT_MIN_SIDE_S = 2.0  # of speech on each side: a clip cut from a recording's turns may hold little of a second voice


def check_one_voice(name: str, speech: np.ndarray, embed: Callable[[np.ndarray], np.ndarray]) -> None:
    """Refuse a voice to enrol whose speech sounds like two people (turns of a recording where the
    diarization joined two voices): its pieces are embedded and judged as the phrase check judges a
    speaker's phrases (``phrase_speakers.holds_two_voices``); a blend would name both people after one."""
    size = int(ENROLMENT_PIECE_S * SAMPLING_RATE)
    pieces = [speech[start : start + size] for start in range(0, len(speech), size)]
    pieces = [piece for piece in pieces if len(piece) >= PHRASE_MIN_S * SAMPLING_RATE]
    if holds_two_voices([embed(piece) for piece in pieces], [len(piece) / SAMPLING_RATE for piece in pieces], ENROLMENT_MIN_SIDE_S):
        raise InvalidRequestError(f"the speech given for {name!r} sounds like two people: enrol a voice from stretches where only "
                                  "they speak")


def _speaker_count_warnings(config: InferenceConfig, found: Diarization | None, spread: float | None = None) -> list[str]:
    """pyannote finds fewer speakers than asked for with a UserWarning in the server's log; the
    client who asked should hear it too. A count diarization chose itself is questioned where it
    is often wrong (``speaker_count.count_doubts``; ``spread``: the phrase check's, for one voice)."""
    if found is None:
        return []
    wanted = config.num_speakers or config.min_speakers
    count = len({turn.speaker for turn in found.turns})
    if wanted and count < wanted:
        asked = f"exactly {wanted}" if config.num_speakers else f"at least {wanted}"
        return [f"asked for {asked} speakers, but diarization found {count} in this audio"]
    return [] if config.num_speakers else count_doubts(found.turns, spread)


def _response(
    text: str,
    chunks: list,
    speakers: list,
    language: str | None,
    duration: float,
    warnings: list[str],
    decoding: str,
) -> dict[str, Any]:
    return {
        "text": text,
        "chunks": chunks,
        "speakers": speakers,
        "language": language,
        "duration": duration,
        "decoding": decoding,  # the path that ran; "none" when the speech gate found nothing to decode
        "warnings": warnings,
    }
