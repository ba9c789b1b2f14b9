"""Tiny random Whisper and pyannote checkpoints, built offline for the test suite.

The Hugging Face Hub is unreachable in CI, so every model the tests load is made here from
scratch: the shapes and special-token layout of real checkpoints, random weights. Each builder
writes a directory that loads with the same ``from_pretrained`` call production uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import yaml
from tokenizers.pre_tokenizers import ByteLevel
from transformers import (
    WhisperConfig,
    WhisperFeatureExtractor,
    WhisperForCausalLM,
    WhisperForConditionalGeneration,
    WhisperProcessor,
    WhisperTokenizer,
)
from transformers.generation import GenerationConfig

# A handful of languages is enough to test "known" vs "unknown" language codes.
TINY_LANGUAGES = ("en", "de", "fr", "es")
NUM_TIMESTAMP_TOKENS = 1501  # <|0.00|> ... <|30.00|>, as in every real Whisper vocabulary
TINY_MAX_LENGTH = 24  # keeps random-model decoding (which rarely emits EOS) fast


def _special_tokens(multilingual: bool) -> list[str]:
    """Whisper's special tokens in checkpoint order; timestamps must follow <|notimestamps|>."""
    languages = [f"<|{code}|>" for code in TINY_LANGUAGES] if multilingual else []
    return [
        "<|startoftranscript|>",
        *languages,
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
    ]


def build_tokenizer(directory: Path, multilingual: bool) -> WhisperTokenizer:
    """A byte-level BPE tokenizer without merges: every byte is a token, like GPT-2's alphabet."""
    alphabet = sorted(ByteLevel.alphabet())
    vocab = {symbol: index for index, symbol in enumerate(alphabet)}
    vocab["<|endoftext|>"] = len(vocab)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.json").write_text(json.dumps(vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = WhisperTokenizer.from_pretrained(directory, pad_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": _special_tokens(multilingual)})
    timestamps = [f"<|{index * 0.02:.2f}|>" for index in range(NUM_TIMESTAMP_TOKENS)]
    tokenizer.add_tokens(timestamps)
    return tokenizer


def _generation_config(tokenizer: WhisperTokenizer, multilingual: bool, decoder_layers: int, heads: int) -> GenerationConfig:
    token = tokenizer.convert_tokens_to_ids
    eos = token("<|endoftext|>")
    config = GenerationConfig(
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        decoder_start_token_id=token("<|startoftranscript|>"),
        max_length=TINY_MAX_LENGTH,
        no_timestamps_token_id=token("<|notimestamps|>"),
        prev_sot_token_id=token("<|startofprev|>"),
        is_multilingual=multilingual,
        task_to_id={"transcribe": token("<|transcribe|>"), "translate": token("<|translate|>")},
        lang_to_id={f"<|{c}|>": token(f"<|{c}|>") for c in TINY_LANGUAGES} if multilingual else {},
        begin_suppress_tokens=[token("Ġ"), eos],
        suppress_tokens=[],
        max_initial_timestamp_index=50,
        alignment_heads=[[decoder_layers - 1, head] for head in range(heads)],
        return_timestamps=False,
    )
    return config


def build_whisper(
    directory: Path,
    *,
    multilingual: bool = True,
    decoder_layers: int = 2,
    seed: int = 0,
) -> Path:
    """Save a random ``WhisperForConditionalGeneration`` with tokenizer and feature extractor."""
    tokenizer = build_tokenizer(directory, multilingual)
    heads = 2
    token = tokenizer.convert_tokens_to_ids
    eos = token("<|endoftext|>")
    config = WhisperConfig(
        vocab_size=len(tokenizer),
        num_mel_bins=80,
        d_model=16,
        encoder_layers=1,
        decoder_layers=decoder_layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_source_positions=1500,
        max_target_positions=448,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        decoder_start_token_id=token("<|startoftranscript|>"),
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config = _generation_config(tokenizer, multilingual, decoder_layers, heads)
    model.save_pretrained(directory)
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer).save_pretrained(
        directory
    )
    return directory


def build_assistant(main_model_dir: Path, directory: Path, *, causal: bool) -> Path:
    """A distil-style assistant: the main model with only its first decoder layer kept.

    Sharing the main model's layers (as distil-whisper initialises its student) gives it the
    same vocabulary and encoder width, and a realistic mix of accepted and rejected drafts.
    """
    main = WhisperForConditionalGeneration.from_pretrained(main_model_dir)
    main.model.decoder.layers = main.model.decoder.layers[:1]
    main.config.decoder_layers = 1
    main.generation_config.alignment_heads = [[0, 0]]
    directory.mkdir(parents=True, exist_ok=True)
    if causal:
        config = main.config
        config.is_encoder_decoder = False
        assistant = WhisperForCausalLM(config)
        assistant.model.decoder.load_state_dict(main.model.decoder.state_dict())
        assistant.proj_out.weight = assistant.model.decoder.embed_tokens.weight
        assistant.generation_config = main.generation_config
        assistant.save_pretrained(directory)
    else:
        main.save_pretrained(directory)
    WhisperProcessor.from_pretrained(main_model_dir).save_pretrained(directory)
    return directory


def build_pyannote_pipeline(directory: Path, seed: int = 0) -> Path:
    """A local ``speaker-diarization-community-1``-shaped pipeline with random checkpoints."""
    import lightning
    from pyannote.audio.core.task import Problem, Resolution, Specifications
    from pyannote.audio.models.embedding import WeSpeakerResNet34
    from pyannote.audio.models.segmentation import PyanNet

    torch.manual_seed(seed)
    segmentation = PyanNet(sincnet={"stride": 10}, lstm={"hidden_size": 16, "num_layers": 1}, linear={"hidden_size": 16})
    segmentation.specifications = Specifications(
        problem=Problem.MONO_LABEL_CLASSIFICATION,
        resolution=Resolution.FRAME,
        duration=5.0,
        min_duration=5.0,
        classes=["speaker#1", "speaker#2", "speaker#3"],
        powerset_max_classes=2,
        permutation_invariant=True,
    )
    segmentation.build()
    embedding = WeSpeakerResNet34()
    embedding.specifications = Specifications(
        problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=5.0
    )
    for name, model in (("segmentation", segmentation), ("embedding", embedding)):
        checkpoint = {
            "state_dict": model.state_dict(),
            "hyper_parameters": dict(model.hparams),
            "pytorch-lightning_version": lightning.__version__,
        }
        model.on_save_checkpoint(checkpoint)
        (directory / name).mkdir(parents=True, exist_ok=True)
        torch.save(checkpoint, directory / name / "pytorch_model.bin")
    _save_plda(directory / "plda", embedding_dim=embedding.dimension)
    config = {
        "version": "4.0.0",
        "pipeline": {
            "name": "pyannote.audio.pipelines.SpeakerDiarization",
            "params": {
                "segmentation": "$model/segmentation",
                "embedding": "$model/embedding",
                "plda": "$model/plda",
                "segmentation_batch_size": 8,
                "embedding_batch_size": 8,
                "embedding_exclude_overlap": True,
            },
        },
        "params": {
            "segmentation": {"min_duration_off": 0.0},
            "clustering": {"threshold": 0.6, "Fa": 0.07, "Fb": 0.8},
        },
    }
    (directory / "config.yaml").write_text(yaml.safe_dump(config))
    return directory


def _save_plda(directory: Path, embedding_dim: int, lda_dim: int = 16) -> None:
    """Random but well-conditioned VBx/PLDA transforms in pyannote's ``.npz`` layout."""
    generator = np.random.default_rng(0)
    directory.mkdir(parents=True, exist_ok=True)
    np.savez(
        directory / "xvec_transform.npz",
        mean1=generator.normal(size=embedding_dim),
        mean2=generator.normal(size=lda_dim),
        lda=generator.normal(size=(embedding_dim, lda_dim)),
    )
    np.savez(
        directory / "plda.npz",
        mu=generator.normal(size=lda_dim),
        tr=np.eye(lda_dim) + 0.1 * generator.normal(size=(lda_dim, lda_dim)),
        psi=generator.uniform(0.5, 2.0, size=lda_dim),
    )


def build_campplus_weights(path: Path, seed: int = 0) -> Path:
    """A random CAM++ state dict saved as 3D-Speaker saves it (``xvector.dense.*`` keys), with
    non-trivial batch-norm statistics so a mix-up of layers would show."""
    from speaker_transcripts.models.campplus import CamPlusPlus

    torch.manual_seed(seed)
    model = CamPlusPlus().eval()
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    state = {("xvector." + key if key.startswith("dense.") else key): value for key, value in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    return path


def build_wespeaker_ort(directory: Path, seed: int = 0) -> bytes:
    """A stand-in for community-1's int8 WeSpeaker graph, in ONNX Runtime's ORT format as
    moonshine-voice ships it, with its inputs and outputs (``fbank`` (batch, frames, 80), ``weights``
    (batch, frames) -> ``embedding`` (batch, 256)): the weighted mean of the fbank frames times a
    random (80, 256) matrix, so the pooling weights visibly change the answer."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    projection = np.random.default_rng(seed).standard_normal((80, 256)).astype(np.float32)
    nodes = [
        helper.make_node("Unsqueeze", ["weights", "last"], ["weights3"]),
        helper.make_node("Mul", ["fbank", "weights3"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted", "time"], ["total"], keepdims=0),
        helper.make_node("ReduceSum", ["weights", "time"], ["mass"], keepdims=1),
        helper.make_node("Div", ["total", "mass"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "projection"], ["embedding"]),
    ]
    graph = helper.make_graph(
        nodes, "wespeaker_stand_in",
        [helper.make_tensor_value_info("fbank", TensorProto.FLOAT, ["batch", "num_frames", 80]),
         helper.make_tensor_value_info("weights", TensorProto.FLOAT, ["batch", "num_frames"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", 256])],
        initializer=[numpy_helper.from_array(projection, "projection"),
                     numpy_helper.from_array(np.array([-1], dtype=np.int64), "last"),
                     numpy_helper.from_array(np.array([1], dtype=np.int64), "time")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC  # portable, as shipped ORT files are
    options.optimized_model_filepath = str(directory / "wespeaker.ort")
    options.add_session_config_entry("session.save_model_format", "ORT")
    directory.mkdir(parents=True, exist_ok=True)
    onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return (directory / "wespeaker.ort").read_bytes()
