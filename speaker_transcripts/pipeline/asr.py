"""Whisper speech recognition: models loaded once, then one call per request.

Uses the transformers ASR pipeline with an optional assistant model for speculative decoding.
Long audio is decoded as speech-aligned pieces in batches (``long_form.py``), or, on request,
by the pipeline's own chunked long-form decoding.

Why ``DraftWhisper`` exists: with a full encoder-decoder assistant, transformers (5.24) drafts
through ``WhisperForConditionalGeneration.generate``, which re-sets ``begin_index`` on the logits
processors it shares with the main model, so the main model's timestamp rules stop holding while
verifying drafts and assisted output differs from greedy (and can loop). Drafting through the generic
``GenerationMixin.generate`` leaves the shared processors alone: assisted output is token-identical
to greedy, timestamps included (``tests/pipeline/test_asr.py``). A ``WhisperForCausalLM`` assistant
already drafts that way.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import (
    AutoConfig,
    AutoProcessor,
    GenerationMixin,
    WhisperForCausalLM,
    WhisperForConditionalGeneration,
    pipeline,
)
from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

from speaker_transcripts.config import InferenceConfig, ModelCapabilities, ModelSettings, token_budget
from speaker_transcripts.errors import InvalidRequestError, RequestAbandoned
from speaker_transcripts.models.cpu_fast_path import bfloat16_supported, encoder_of, speed_up_for_cpu
from speaker_transcripts.models.encoder_window import encoder_window, window_frames
from speaker_transcripts.pipeline.audio import SAMPLING_RATE, as_float32
from speaker_transcripts.pipeline.cpu_threads import torch_threads, within_threads
from speaker_transcripts.pipeline.forced_prefix import forced_prefix
from speaker_transcripts.pipeline.long_form import Piece, on_file_clock
from speaker_transcripts.pipeline.loop_ending import EndLoops
from speaker_transcripts.pipeline.piece_ending import FinishEachPiece
from speaker_transcripts.pipeline.repetition import COMPRESSION_RATIO_LIMIT, compression_ratio, looping, repeated_tail
from speaker_transcripts.pipeline.token_suppression import with_masks_built_once
from speaker_transcripts.pipeline.transcript import Chunk, close_timestamps, joined_text, spelled

logger = logging.getLogger(__name__)
# Word alignment takes the std of a one-row matrix for one-token segments; transformers handles the
# result, but torch warns on every such segment.
warnings.filterwarnings("ignore", message=r"std\(\): degrees of freedom", module="transformers.models.whisper")


class _HandledWhisperNotices(logging.Filter):
    """Notices about things this module already handles, not worth a line per request:
    Whisper's own ``generate`` (5.24) passes suppress tokens beside its generation config and then
    warns that doing so is deprecated (nothing a caller can change); and a speech piece that ends
    mid-word leaves Whisper's last segment open, which ``long_form.on_file_clock`` closes."""

    HANDLED = (
        "Passing `generation_config` together with generation-related",
        "Whisper did not predict an ending timestamp",
        "`max_new_tokens` will take precedence",  # ours (config.token_budget) over the checkpoint's max_length
    )

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(notice in message for notice in self.HANDLED)


for _logger_name in ("transformers.generation.utils", "transformers.models.whisper.tokenization_whisper"):
    logging.getLogger(_logger_name).addFilter(_HandledWhisperNotices())


@contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers draws a "Loading weights" bar per model; the orchestrator says in one line
    what it loaded and how long it took, so the bars are off while loading (and back on after,
    for a caller's own models)."""
    from transformers.utils import logging as transformers_logging

    enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            transformers_logging.enable_progress_bar()


def _drop_handled_checkpoint_settings(model: WhisperForConditionalGeneration, processor: Any) -> None:
    """Settings older Whisper checkpoints (OpenAI's on the Hub among them) carry, which this
    module supersedes and transformers warns about on every run: ``forced_decoder_ids`` (the
    task and language are passed on every call, or detected), and the tokenizer's
    ``clean_up_tokenization_spaces=True``, which transformers already ignores for Whisper's BPE
    tokenizer (it would strip spaces before punctuation). Dropping them changes no output."""
    if getattr(model.generation_config, "forced_decoder_ids", None) is not None:
        model.generation_config.forced_decoder_ids = None
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is not None and getattr(tokenizer, "clean_up_tokenization_spaces", False):
        tokenizer.clean_up_tokenization_spaces = False


def without_attention_maps(_module: torch.nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Word timestamps make Whisper's ``generate`` ask for attention weights (5.24), and the
    encoder then keeps its self-attention maps too: layers x heads x 1500 x 1500 floats per piece
    (216 MB per 30-s piece for whisper-tiny.en, 432 MB for base, gigabytes for large), though word
    alignment reads only the decoder's cross-attention. Measured with tiny.en
    (``bench/memory/request_cost.py``, "defaults + word timestamps, 10 s", one piece): 240 MB above the
    idle server with them, 85 MB without; same text."""
    return args, {**kwargs, "output_attentions": False}


def encoder_for_word_timing(model: WhisperForConditionalGeneration) -> None:
    """Whisper's encoder as word timestamps leave it best: keeping no attention maps
    (``without_attention_maps``) and on the attention it was loaded with (``_encoder_kept_on_sdpa``).
    Word alignment reads only the decoder's cross-attention, so the words are the same."""
    model.get_encoder().register_forward_pre_hook(without_attention_maps, with_kwargs=True)
    _encoder_kept_on_sdpa(model)


def _encoder_kept_on_sdpa(model: WhisperForConditionalGeneration) -> None:
    """Word timestamps make Whisper's ``generate`` switch the whole model to eager attention
    (5.24), for the decoder's cross-attention weights. The encoder's are never read
    (``without_attention_maps``), and eager attention made the encoder 1.5-2.2x slower (whisper-base,
    8 x 30 s on 2 cores: 6.7-8.6 s on SDPA, 13.0-14.8 s eager), on every diarized request. So the
    encoder's attentions get their own copy of the config, which stays on the implementation loaded."""
    if model.config._attn_implementation != "sdpa":
        return
    own = copy.copy(model.config)
    for layer in model.get_encoder().layers:
        layer.self_attn.config = own


def _large_products(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The parts of a Whisper (or a decoder-only assistant) whose work is large at any batch size, which
    the CPU shares out over every core while the rest of the decoding loop runs on one: the encoder, the
    decoder's cross-attention (each step reads the keys and values of 1,500 encoder frames a row: 72 MB a
    step for 2 rows of whisper-base) and the vocabulary projection (51,865 x 512). The 1-min conversation,
    alternating in one process: the projection on every core 3.96 -> 3.46 s, the cross-attention too
    3.49 -> 3.18 s (medians), the same text."""
    cross_attention = [layer.encoder_attn for layer in model.get_decoder().layers]
    return [part for part in (encoder_of(model), *cross_attention, model.get_output_embeddings()) if part is not None]


def _alignment_heads(model: WhisperForConditionalGeneration) -> dict[int, list[int]]:
    """The decoder's alignment heads (the checkpoint's ``alignment_heads``), by layer."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in model.generation_config.alignment_heads:
        by_layer.setdefault(int(layer), []).append(int(head))
    return by_layer


def _kept_attention(heads: list[int]) -> Callable[..., tuple[Any, Any] | None]:
    """A forward hook on a decoder attention that hands on only the weights of ``heads`` (none:
    one zero per query, which keeps the shapes transformers stacks and concatenates)."""

    def hook(_module: torch.nn.Module, _args: tuple, output: tuple[Any, Any]) -> tuple[Any, Any] | None:
        hidden, weights = output
        if weights is None:
            return None
        kept = weights[:, heads] if heads else weights.new_zeros((weights.shape[0], 1, weights.shape[2], 1))
        return hidden, kept

    return hook


def _without_unread_scores(set_return_outputs: Callable[..., Any]) -> Callable[..., Any]:
    """Whisper's ``_set_return_outputs`` (5.24), then no per-token scores unless a
    ``logprob_threshold`` will read them (word timestamps switch them on for nothing else)."""

    def wrapped(**arguments: Any) -> Any:
        result = set_return_outputs(**arguments)
        if arguments.get("logprob_threshold") is None:
            arguments["generation_config"].output_scores = False
        return result

    return wrapped


class DraftWhisper(WhisperForConditionalGeneration):
    """An encoder-decoder assistant that drafts with the generic ``generate`` (see module doc)."""

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        return GenerationMixin.generate(self, *args, **kwargs)


@dataclass(frozen=True)
class Transcript:
    """What Whisper heard: the full text, its timed chunks and the language it decoded in."""

    text: str
    chunks: list[Chunk]
    language: str | None


class SpeechRecognizer:
    """The Whisper pipeline and optional assistant, built once for the life of the endpoint."""

    def __init__(self, settings: ModelSettings) -> None:
        self.device = settings.resolved_device(torch.cuda.is_available())
        self.dtype = getattr(torch, settings.resolved_dtype(self.device))
        token = settings.hf_token.get_secret_value() if settings.hf_token else None
        self.fast_path = settings.cpu_fast_path(self.device)
        # Whisper's large products want every core; a thread that first used torch while a one-thread stage ran
        # would have inherited one (cpu_threads.py), so they state the count Whisper was loaded with.
        self.threads = torch.get_num_threads()
        with quiet_loading():
            model = WhisperForConditionalGeneration.from_pretrained(
                settings.asr_model, dtype=self.dtype, attn_implementation="sdpa", token=token
            )
            processor = AutoProcessor.from_pretrained(settings.asr_model, token=token)
        _drop_handled_checkpoint_settings(model, processor)
        self.model = model.to(self.device).eval()
        # What the weights compute in, for the log and /ready: the dtype, or what the CPU fast path did.
        self.precision = ", ".join(speed_up_for_cpu(self.model)) if self.fast_path else str(self.dtype).removeprefix("torch.")
        encoder_for_word_timing(self.model)
        self.model._retrieve_logit_processors = with_masks_built_once(self.model._retrieve_logit_processors)
        self.processor = processor
        self.pipeline = pipeline(
            "automatic-speech-recognition",
            model=self.model,
            tokenizer=processor.tokenizer,
            feature_extractor=processor.feature_extractor,
            device=self.model.device,
            dtype=self.dtype,
        )
        self.assistant = self._load_assistant(settings.assistant_model, token) if settings.assistant_model else None
        # On the CPU the decoding loop runs on one thread and its large products on every core: a step is
        # otherwise many small products, each of which paid a sleeping OpenMP thread's wake-up on two (the
        # passive policy, cpu_threads.py). whisper-base, 2 cores, ms a step for 2 / 8 / 24 rows: 25.8 / 45.2 /
        # 120.7 with the loop on two threads, 20.5 / 43.9 / 111.1 on one (git show e599421:bench/decoder_threads.py); one thread
        # also leaves the other core to the diarization running beside it.
        self.loop_threads = 1 if self.device == "cpu" else self.threads
        if self.loop_threads != self.threads:
            for model in filter(None, (self.model, self.assistant)):
                for part in _large_products(model):
                    within_threads(part, self.threads)
        generation = self.model.generation_config
        self.capabilities = ModelCapabilities(
            multilingual=bool(getattr(generation, "is_multilingual", False)),
            language_codes=frozenset(token.strip("<|>") for token in (getattr(generation, "lang_to_id", None) or {})),
            language_aliases=dict(TO_LANGUAGE_CODE),
            has_assistant=self.assistant is not None,
            fast_encoder=self.device != "cpu" or (self.model.get_encoder().dtype == torch.bfloat16 and bfloat16_supported()),
        )

    def _load_assistant(self, name: str, token: str | None) -> torch.nn.Module:
        config = AutoConfig.from_pretrained(name, token=token)
        decoder_only = not getattr(config, "is_encoder_decoder", True) or "WhisperForCausalLM" in (
            config.architectures or []
        )
        model_class = WhisperForCausalLM if decoder_only else DraftWhisper
        with quiet_loading():
            assistant = model_class.from_pretrained(name, dtype=self.dtype, attn_implementation="sdpa", token=token)
        if assistant.config.vocab_size != self.model.config.vocab_size:
            raise ValueError(
                f"ASSISTANT_MODEL {name} has a vocabulary of {assistant.config.vocab_size} tokens but the ASR model has "
                f"{self.model.config.vocab_size}; the assistant must share the main model's tokenizer (e.g. distil-whisper for whisper-large)"
            )
        if decoder_only and assistant.config.d_model != self.model.config.d_model:
            raise ValueError(
                f"the decoder-only ASSISTANT_MODEL {name} reads the main model's encoder output, but its width "
                f"({assistant.config.d_model}) differs from the ASR model's ({self.model.config.d_model})"
            )
        assistant = assistant.to(self.device).eval()
        if self.fast_path:
            speed_up_for_cpu(assistant)
        return assistant

    def transcribe(
        self,
        samples: np.ndarray,
        config: InferenceConfig,
        duration: float,
        on_progress: Callable[[float], None] | None = None,
        pieces: Sequence[Piece] | None = None,
        on_segment: Callable[[Chunk], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        shortest_window_s: float | None = None,
        retry_loops: bool = True,
        prefix: str = "",
        fallback_temperatures: Sequence[float] | None = None,
    ) -> Transcript:
        """Run Whisper over 16 kHz mono samples as ``config`` asks (already validated).

        With ``pieces`` (speech-aligned long form, ``long_form.py``) only those stretches are
        decoded, in batches, and their times put back on the file's clock; without, the
        transformers chunked pipeline decodes the whole file in overlapping windows.
        ``on_progress`` hears, while decoding, about how many seconds of audio are done, and
        ``on_segment`` gets each chunk as soon as its piece is decoded (in order; the chunked
        pipeline only hands chunks over at the end). ``should_stop`` is asked at every decoder
        step; when it says yes, ``RequestAbandoned`` ends the work within a step. ``shortest_window_s``
        (with ``pieces``): the encoder reads each batch's longest piece and a margin, at least that many
        seconds, not 30 s (``models/encoder_window.py``; a live session's decodes of a few seconds). Without
        ``retry_loops`` a piece whose text loops gives no words instead of being decoded again (a live
        session's interim decode: the next one hears more and is as soon; four more decodes of a
        looping second cost it 10-14 s on 2 cores). ``prefix``: text Whisper said already at the start of
        the audio (a live session's words sent), given as the start of its answer and returned with it, timed
        anew (``forced_prefix.py``); the token budget counts it. ``fallback_temperatures``: those a piece that
        still loops when decoded again is sampled at (None: ``FALLBACK_TEMPERATURES``; a live session's final decodes: none).
        """
        with torch_threads(self.loop_threads):
            options, language = self._decoding_options(samples, config, pieces)
            prefix_tokens = self.processor.tokenizer.encode(prefix, add_special_tokens=False) if prefix else []
            if prefix_tokens:
                generate_kwargs = options["generate_kwargs"]
                if "max_new_tokens" in generate_kwargs:  # the prefix and its opening timestamp are of the budget
                    generate_kwargs["max_new_tokens"] = max(generate_kwargs["max_new_tokens"] - len(prefix_tokens) - 1, MIN_NEW_TOKENS)
            with (
                forced_prefix(self.model, prefix_tokens),
                torch.inference_mode(),
                self._attention_restored(),
                self._stoppable(should_stop),
                self._word_timing_slimmed(config.return_timestamps == "word"),
            ):
                if pieces is None:
                    raw_chunks = self._decode_chunked(samples, config.chunk_length_s, duration, options, on_progress)
                    chunks = close_timestamps(raw_chunks, duration)
                    for chunk in chunks if on_segment is not None else ():
                        on_segment(chunk)  # the chunked pipeline has nothing to hand over before the end
                else:
                    chunks = self._decode_pieces(samples, pieces, duration, options, on_progress, on_segment, shortest_window_s, retry_loops,
                                                 FALLBACK_TEMPERATURES if fallback_temperatures is None else fallback_temperatures)
        return Transcript(text=joined_text(chunks), chunks=chunks, language=language)

    def _decoding_options(
        self, samples: np.ndarray, config: InferenceConfig, pieces: Sequence[Piece] | None
    ) -> tuple[dict[str, Any], str]:
        """The pipeline's options for this request, and the language it decodes in (detected on
        the first speech when a multilingual model is not told)."""
        language = config.language
        generate_kwargs: dict[str, Any] = {"num_beams": config.num_beams, "do_sample": False}
        if self.capabilities.multilingual:
            language = language or self.detect_language(samples[pieces[0].start :] if pieces else samples)
            generate_kwargs.update(task=config.task, language=language)
        else:
            language = "en"
        if config.assisted:
            generate_kwargs["assistant_model"] = self.assistant
        if config.prompt:
            generate_kwargs["prompt_ids"] = self._prompt_ids(config.prompt)
        budget = token_budget(config.chunk_length_s)
        if budget is not None:
            generate_kwargs["max_new_tokens"] = budget
        options = {
            "batch_size": config.batch_size,
            "return_timestamps": "word" if config.return_timestamps == "word" else True,
            "generate_kwargs": generate_kwargs,
        }
        return options, language

    def _decode_chunked(
        self,
        samples: np.ndarray,
        chunk_length_s: float,
        duration: float,
        options: dict[str, Any],
        on_progress: Callable[[float], None] | None,
    ) -> list[dict[str, Any]]:
        with self._windows_counted(on_progress, chunk_length_s, duration):
            result = self.pipeline(
                {"raw": as_float32(samples), "sampling_rate": SAMPLING_RATE},  # the whole file: this path copies it
                chunk_length_s=chunk_length_s,
                ignore_warning=True,  # the "chunk_length_s is very experimental" paragraph, once per file
                **options,
            )
        return result.get("chunks") or []

    def _decode_pieces(
        self,
        samples: np.ndarray,
        pieces: Sequence[Piece],
        duration: float,
        options: dict[str, Any],
        on_progress: Callable[[float], None] | None,
        on_segment: Callable[[Chunk], None] | None,
        shortest_window_s: float | None,
        retry_loops: bool,
        fallback_temperatures: Sequence[float],
    ) -> list[Chunk]:
        """Each piece is one short-form input; the pipeline batches them as they are handed out.
        A piece's chunks are final once it is decoded, so they are handed on there and then.

        When they are streamed (``on_segment``), the first piece is decoded alone before the rest
        are batched: in one batch nothing is final until the whole batch is, and the first delta
        of a 106-s file arrived at 6.21 s of a 6.25-s request.

        A piece whose text repeats itself (``repetition.looping``) is decoded again after the
        others (``_decoded_again``); it and the pieces after it are handed on once it is."""
        progress = _PieceProgress(pieces, duration, on_progress)
        batch_size = options["batch_size"]
        alone = 1 if on_segment is not None and batch_size > 1 and len(pieces) > 1 else 0
        groups = [(0, alone, 1), (alone, len(pieces), batch_size)] if alone else [(0, len(pieces), batch_size)]
        decoded: list[list[Chunk] | None] = [None] * len(pieces)
        suspect: dict[int, str] = {}
        handed_on = 0

        def hand_on() -> None:
            nonlocal handed_on
            while handed_on < len(pieces) and decoded[handed_on] is not None and handed_on not in suspect:
                for chunk in decoded[handed_on] if on_segment is not None else ():
                    on_segment(chunk)
                handed_on += 1

        handle = self.model.get_decoder().register_forward_hook(progress.decoder_step) if on_progress else None
        try:
            with self._one_pass_per_piece(pieces, options, shortest_window_s, end_loops=not retry_loops) as one_pass:
                for first, last, group_batch in groups:
                    inputs = (
                        {"raw": piece.audio(samples), "sampling_rate": SAMPLING_RATE}
                        for piece in progress.handing_out(first, last)
                    )
                    results = self.pipeline(inputs, **{**one_pass, "batch_size": group_batch})
                    for index, result in enumerate(results, start=first):
                        decoded[index] = close_timestamps(on_file_clock(result.get("chunks") or [], pieces[index], SAMPLING_RATE), duration)
                        if not retry_loops:  # a row ended in a loop (``EndLoops``) keeps the loop's first copy
                            decoded[index] = _without_repeated_tail(decoded[index])
                        reason = looping(joined_text(decoded[index]))
                        if reason is not None:
                            suspect[index] = reason
                        else:
                            progress.piece_done()
                        hand_on()
            for index, reason in sorted(suspect.items()):
                decoded[index] = self._decoded_again(samples, pieces[index], duration, options, reason, fallback_temperatures) if retry_loops else []
                del suspect[index]
                progress.piece_done()
                hand_on()
        finally:
            if handle is not None:
                handle.remove()
        return [chunk for piece_chunks in decoded for chunk in piece_chunks or ()]

    def _decoded_again(self, samples: np.ndarray, piece: Piece, duration: float, options: dict[str, Any], reason: str,
                       fallback_temperatures: Sequence[float]) -> list[Chunk]:
        """A piece whose one-pass text repeats itself, decoded as transformers decodes any input
        (end-of-text allowed: where Whisper wants to stop early it may), and while that text still
        compresses like a loop, sampled at ``fallback_temperatures`` (``FALLBACK_TEMPERATURES`` for
        a file; seeded: the same audio gives the same text), as Whisper's own fallback; the least repetitive text is kept."""
        logger.debug("the piece at %.1f-%.1f s was decoded again: %s", piece.start / SAMPLING_RATE, piece.end / SAMPLING_RATE, reason)
        best: list[Chunk] = []
        best_ratio = float("inf")
        for temperature in (0.0, *fallback_temperatures):
            sampling = {"do_sample": True, "temperature": temperature} if temperature else {}
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                result = self.pipeline(
                    {"raw": piece.audio(samples), "sampling_rate": SAMPLING_RATE},
                    **{**options, "batch_size": 1, "generate_kwargs": {**options["generate_kwargs"], **sampling}},
                )
            chunks = close_timestamps(on_file_clock(result.get("chunks") or [], piece, SAMPLING_RATE), duration)
            ratio = compression_ratio(joined_text(chunks))
            if ratio < best_ratio:
                best, best_ratio = chunks, ratio
            if ratio <= COMPRESSION_RATIO_LIMIT:
                break
        return best

    @contextmanager
    def _one_pass_per_piece(
        self, pieces: Sequence[Piece], options: dict[str, Any], shortest_window_s: float | None = None, end_loops: bool = False
    ) -> Iterator[dict[str, Any]]:
        """The pipeline's options for decoding each piece in one pass (``piece_ending.py``).

        ``FinishEachPiece`` needs each row's audio length, which the pipeline does not pass on:
        ``generate`` is wrapped to hand it the next inputs' lengths (the pipeline calls it on the
        pieces in order, a batch at a time). With word timestamps and one pass, transformers'
        ``segments`` leave out the prompt tokens that ``sequences`` keep, and the pipeline would
        read them side by side (IndexError); its ``token_timestamps`` cover the sequences, so
        ``segments`` are dropped from the answer. With a prompt, the sequences start with it, and the
        pipeline would give each word the time of the word a prompt's length before it (``Good``
        0.0-0.0, ``morning,`` 0.0-0.0 instead of 0.0-0.44, 0.44-1.14): the prompt is cut off them.
        With ``shortest_window_s`` the features are cut to the rows' longest piece and a margin (at
        least that many seconds) and the encoder reads only those (``encoder_window``). ``end_loops``: a row
        that starts repeating itself ends there (``loop_ending.EndLoops``), for decodes not decoded again when they loop."""
        finishing = FinishEachPiece(self.model.generation_config)
        start_of_transcript = self.model.generation_config.decoder_start_token_id
        lengths = [piece.length / SAMPLING_RATE for piece in pieces]
        generate = self.model.generate

        def generate_in_one_pass(*args: Any, **kwargs: Any) -> Any:
            features = kwargs.get("input_features", args[0] if args else None)
            rows = 0 if features is None else features.shape[0]
            finishing.piece_seconds = lengths[:rows]
            del lengths[:rows]
            window = nullcontext()
            if shortest_window_s is not None and rows:
                frames = window_frames(max(finishing.piece_seconds), features.shape[-1], shortest_window_s)
                args, kwargs = _features_cut(args, kwargs, frames)
                window = encoder_window(self.model, frames)
            with window:
                output = generate(*args, **kwargs)
            if isinstance(output, dict) and "segments" in output and "token_timestamps" in output:
                output = {key: value for key, value in output.items() if key != "segments"}
                if kwargs.get("prompt_ids") is not None:  # the prompt's positions would shift every word's time
                    start = int((output["sequences"][0] == start_of_transcript).nonzero()[0])
                    output["sequences"], output["token_timestamps"] = output["sequences"][:, start:], output["token_timestamps"][:, start:]
            return output

        self.model.generate = generate_in_one_pass
        try:
            processors = [finishing, EndLoops(self.model.generation_config)] if end_loops else [finishing]
            generate_kwargs = {**options["generate_kwargs"], "force_unique_generate_call": True, "logits_processor": processors}
            yield {**options, "generate_kwargs": generate_kwargs}
        finally:
            del self.model.generate  # the class's own again

    def warm_up(self) -> None:
        """Run every loaded path once on a second of quiet noise: the first real request then
        doesn't pay for lazy initialisation (kernels, caches, the assistant's first draft)."""
        quiet = (np.random.default_rng(0).standard_normal(SAMPLING_RATE) * 1e-3).astype(np.float32)
        config = InferenceConfig(language="en" if self.capabilities.multilingual else None, assisted=False)
        self.transcribe(quiet, config, duration=1.0)
        if self.assistant is not None:
            self.transcribe(quiet, config.model_copy(update={"assisted": True, "batch_size": 1}), duration=1.0)

    def _prompt_ids(self, prompt: str) -> torch.Tensor:
        """The prompt as Whisper's ``<|startofprev|>`` prefix; it has room for half its context."""
        try:
            prompt_ids = self.processor.get_prompt_ids(prompt, return_tensors="pt")
        except ValueError:  # transformers refuses special tokens in a prompt ("<|endoftext|>", "<|0.00|>")
            raise InvalidRequestError(
                "the prompt contains Whisper's special tokens (text like <|endoftext|> or <|0.00|>); send plain text"
            ) from None
        room = self.model.config.max_target_positions // 2 - 1
        if len(prompt_ids) - 1 > room:
            raise InvalidRequestError(
                f"the prompt is {len(prompt_ids) - 1} tokens long; this Whisper model takes at most {room}"
            )
        return prompt_ids.to(self.model.device)

    def detect_language(self, samples: np.ndarray) -> str:
        """Whisper's language guess on the first 30 s, used for every chunk of the request.

        One decision per request keeps long audio from flipping language between chunks, and
        the transformers pipeline cannot report the language when batching (5.24 raises
        ``IndexError`` with ``return_language=True`` and ``batch_size > 1``).
        """
        features = self.processor.feature_extractor(
            as_float32(samples[: 30 * SAMPLING_RATE]), sampling_rate=SAMPLING_RATE, return_tensors="pt"
        ).input_features.to(self.model.device, self.dtype)
        with torch.inference_mode():
            language_token_ids = self.model.detect_language(features)
        token = self.processor.tokenizer.convert_ids_to_tokens(int(language_token_ids[0]))
        return token.strip("<|>")

    @contextmanager
    def _windows_counted(
        self, on_progress: Callable[[float], None] | None, chunk_length_s: float, duration: float
    ) -> Iterator[None]:
        """Count the windows the encoder has seen; the chunked pipeline advances about two
        thirds of a window per window (it overlaps a sixth on each side)."""
        if on_progress is None:
            yield
            return
        windows_done = 0

        def count_windows(_module: torch.nn.Module, _inputs: Any, output: Any) -> None:
            nonlocal windows_done
            windows_done += output[0].shape[0]
            on_progress(min(duration, windows_done * chunk_length_s * 2 / 3))

        handle = self.model.get_encoder().register_forward_hook(count_windows)
        try:
            yield
        finally:
            handle.remove()
        on_progress(duration)  # the estimate above is approximate; the end is not

    @contextmanager
    def _stoppable(self, should_stop: Callable[[], bool] | None) -> Iterator[None]:
        """Abandoned work stops at the next decoder step instead of running to the end (a
        request whose client left or whose deadline passed would otherwise hold the models)."""
        if should_stop is None:
            yield
            return

        def check(_module: torch.nn.Module, _inputs: Any) -> None:
            if should_stop():
                raise RequestAbandoned("the request was abandoned; decoding stopped")

        handle = self.model.get_decoder().register_forward_pre_hook(check)
        try:
            yield
        finally:
            handle.remove()

    @contextmanager
    def _word_timing_slimmed(self, word_timestamps: bool) -> Iterator[None]:
        """Word timestamps read the cross-attention of a few alignment heads (whisper-base: 8 of its
        48), but transformers (5.24) keeps, for every token of every piece until the batch ends,
        every decoder layer's and head's cross- and self-attention (6 x 8 x 1500 floats a token for
        base) and the scores over the whole vocabulary (51,865 floats a token), which only a
        ``logprob_threshold`` fallback reads (none is passed here): 1.8 GB per 150 tokens of a full
        batch of 24. While words are timed, each decoder attention hands on only its alignment
        heads (the others one zero per query, ``alignment_heads`` numbered to match) and no scores
        are kept; the words and times are the same (tests/pipeline/test_asr.py)."""
        if not word_timestamps or not getattr(self.model.generation_config, "alignment_heads", None):
            yield
            return
        by_layer = _alignment_heads(self.model)
        configured = self.model.generation_config.alignment_heads
        handles = []
        for index, layer in enumerate(self.model.get_decoder().layers):
            handles.append(layer.encoder_attn.register_forward_hook(_kept_attention(by_layer.get(index, [])), prepend=True))
            handles.append(layer.self_attn.register_forward_hook(_kept_attention([]), prepend=True))
        self.model.generation_config.alignment_heads = [
            [layer, by_layer[int(layer)].index(int(head))] for layer, head in configured
        ]
        self.model._set_return_outputs = _without_unread_scores(type(self.model)._set_return_outputs)
        try:
            yield
        finally:
            del self.model._set_return_outputs
            self.model.generation_config.alignment_heads = configured
            for handle in handles:
                handle.remove()

    @contextmanager
    def _attention_restored(self) -> Iterator[None]:
        """Word timestamps make transformers switch the model to eager attention for good;
        put SDPA back afterwards so one word-level request doesn't slow every later one."""
        implementation = self.model.config._attn_implementation
        try:
            yield
        finally:
            self.model.config._attn_implementation = implementation


# A decode continuing a forced prefix may write at least this many tokens, however long the prefix.
MIN_NEW_TOKENS = 16
# Whisper's own temperature fallback after greedy decoding (transcribe.py: 0.0, 0.2, ..., 1.0), cut to the
# first three steps: each is one more decode of the piece.
FALLBACK_TEMPERATURES = (0.2, 0.4, 0.6)
# Whisper writes about 3 tokens per second of English speech with timestamps (measured on the dev
# conversations); a batch is expected to take this many decoder steps per second of its longest piece.
EXPECTED_STEPS_PER_S = 4.0


def _without_repeated_tail(chunks: list[Chunk]) -> list[Chunk]:
    """``chunks`` without the copies of a loop at their end (``repetition.repeated_tail`` on the words'
    letters and digits: "Morning." and "Morning" are one word), the first copy kept."""
    return chunks[: len(chunks) - repeated_tail([spelled(chunk) for chunk in chunks])]


def _features_cut(args: tuple, kwargs: dict[str, Any], frames: int) -> tuple[tuple, dict[str, Any]]:
    """``generate``'s arguments with the mel features (and their attention mask) cut to ``frames``."""
    if "input_features" in kwargs:
        kwargs = {**kwargs, "input_features": kwargs["input_features"][..., :frames]}
    else:
        args = (args[0][..., :frames], *args[1:])
    if kwargs.get("attention_mask") is not None:
        kwargs["attention_mask"] = kwargs["attention_mask"][..., :frames]
    return args, kwargs


class _PieceProgress:
    """Progress over speech-aligned pieces that moves during a batch, not only after it.

    The pipeline pulls pieces from a generator a batch at a time, so the pieces handed out but
    not yet finished are the batch in flight. Each decoder step moves the report through that
    batch's share of the audio, in proportion to the steps its longest piece should need, up
    to 95 %; a finished piece moves it to the piece's end.
    """

    def __init__(self, pieces: Sequence[Piece], duration: float, on_progress: Callable[[float], None] | None) -> None:
        self.pieces = pieces
        self.duration = duration
        self.on_progress = on_progress
        self.handed = 0
        self.finished = 0
        self.steps = 0
        self.reported = 0.0

    def handing_out(self, first: int, last: int) -> Iterator[Piece]:
        for piece in self.pieces[first:last]:
            self.handed += 1
            yield piece

    def decoder_step(self, _module: torch.nn.Module, _inputs: Any, _output: Any) -> None:
        if self.handed <= self.finished:
            return
        self.steps += 1
        batch = self.pieces[self.finished : self.handed]
        longest = max(piece.length for piece in batch) / SAMPLING_RATE
        share = min(self.steps / (EXPECTED_STEPS_PER_S * longest + 1), 0.95)
        start = self.pieces[self.finished - 1].end / SAMPLING_RATE if self.finished else 0.0
        self._report(start + share * (batch[-1].end / SAMPLING_RATE - start))

    def piece_done(self) -> None:
        self.finished += 1
        if self.finished == self.handed:
            self.steps = 0  # the next batch starts from its first step
        last = self.finished == len(self.pieces)
        self._report(self.duration if last else self.pieces[self.finished - 1].end / SAMPLING_RATE)

    def _report(self, seconds: float) -> None:
        if self.on_progress is not None and seconds > self.reported:
            self.reported = min(seconds, self.duration)
            self.on_progress(self.reported)
