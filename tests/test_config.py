"""Settings from the environment and every request-validation rule (no torch needed)."""

from __future__ import annotations

import json

import pytest

from speaker_transcripts.config import (
    DEFAULT_ASR_MODEL,
    SELF_HOSTED_ASR_MODEL,
    SELF_HOSTED_DIARIZATION_MODEL,
    InferenceConfig,
    ModelCapabilities,
    ModelSettings,
    ServerSettings,
    parse_parameters,
    resolve_request,
    timed_by_words,
)
from speaker_transcripts.errors import InvalidRequestError

MULTILINGUAL = ModelCapabilities(
    multilingual=True,
    language_codes=frozenset({"en", "de", "fr"}),
    language_aliases={"german": "de", "english": "en"},
    has_assistant=True,
    has_diarization=True,
)
ENGLISH_ONLY = ModelCapabilities(multilingual=False, language_codes=frozenset())


def test_settings_default_to_large_v3_without_extras():
    settings = ModelSettings()
    assert settings.asr_model == DEFAULT_ASR_MODEL
    assert settings.assistant_model is None and settings.diarization_model is None and settings.hf_token is None


def test_settings_read_env_when_built_not_at_import(monkeypatch):
    monkeypatch.setenv("ASR_MODEL", "openai/whisper-base")
    monkeypatch.setenv("ASSISTANT_MODEL", "distil-whisper/distil-large-v3")
    monkeypatch.setenv("DIARIZATION_MODEL", "pyannote/speaker-diarization-community-1")
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    settings = ModelSettings()
    assert settings.asr_model == "openai/whisper-base"
    assert settings.assistant_model == "distil-whisper/distil-large-v3"
    assert settings.diarization_model == "pyannote/speaker-diarization-community-1"
    assert settings.hf_token.get_secret_value() == "hf_secret_value"


def test_token_never_appears_in_repr(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    settings = ModelSettings()
    assert "hf_secret_value" not in repr(settings) and "hf_secret_value" not in str(settings.model_dump())


def test_empty_env_vars_count_as_unset(monkeypatch):
    for name in ("ASR_MODEL", "ASSISTANT_MODEL", "DIARIZATION_MODEL", "HF_TOKEN", "DEVICE"):
        monkeypatch.setenv(name, "")
    settings = ModelSettings()
    assert settings.asr_model == DEFAULT_ASR_MODEL
    assert settings.assistant_model is None and settings.diarization_model is None and settings.hf_token is None
    assert settings.device == "auto"


def test_self_hosted_defaults_are_the_embedded_models_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("DIARIZATION_MODEL", raising=False)
    defaults = ModelSettings.self_hosted()
    assert (defaults.asr_model, defaults.diarization_model) == (SELF_HOSTED_ASR_MODEL, SELF_HOSTED_DIARIZATION_MODEL)
    assert ModelSettings().asr_model == DEFAULT_ASR_MODEL  # the Endpoints handler keeps its own default
    monkeypatch.setenv("ASR_MODEL", "openai/whisper-small")
    monkeypatch.setenv("DIARIZATION_MODEL", "None")
    chosen = ModelSettings.self_hosted()
    assert (chosen.asr_model, chosen.diarization_model) == ("openai/whisper-small", None)


def _fake_checkpoint(path, model_type="whisper"):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


def test_repository_checkpoint_is_used_when_asr_model_unset(tmp_path):
    repository = _fake_checkpoint(tmp_path / "repository")
    assert ModelSettings.for_repository(repository).asr_model == str(repository)


def test_asr_model_env_wins_over_repository_checkpoint(tmp_path, monkeypatch):
    repository = _fake_checkpoint(tmp_path / "repository")
    monkeypatch.setenv("ASR_MODEL", "openai/whisper-small")
    assert ModelSettings.for_repository(repository).asr_model == "openai/whisper-small"


@pytest.mark.parametrize("model_type", ["bert", None])
def test_repository_without_whisper_checkpoint_keeps_default(tmp_path, model_type):
    repository = tmp_path / "repository"
    if model_type:
        _fake_checkpoint(repository, model_type)
    assert ModelSettings.for_repository(repository).asr_model == DEFAULT_ASR_MODEL
    assert ModelSettings.for_repository("").asr_model == DEFAULT_ASR_MODEL


def test_device_and_dtype_auto():
    settings = ModelSettings()
    assert settings.resolved_device(cuda_available=False) == "cpu"
    assert settings.resolved_device(cuda_available=True) == "cuda:0"
    assert settings.resolved_dtype("cpu") == "float32"
    assert settings.resolved_dtype("cuda:0") == "float16"
    assert ModelSettings(dtype="bfloat16").resolved_dtype("cuda:0") == "bfloat16"


def test_defaults_follow_the_blog():
    config, warnings = parse_parameters(None)
    assert (config.task, config.batch_size, config.assisted, config.chunk_length_s, config.sampling_rate) == (
        "transcribe", 24, None, 30, 16000
    )
    assert config.num_beams == 1 and config.return_timestamps == "segment" and warnings == []


def test_unknown_parameters_are_reported():
    config, warnings = parse_parameters({"language": "en", "temprature": 0.2})
    assert config.language == "en"
    assert warnings == ["unknown parameter 'temprature' was ignored"]


@pytest.mark.parametrize(
    ("parameters", "named"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 10_000}, "batch_size"),
        ({"batch_size": "many"}, "batch_size"),
        ({"chunk_length_s": 0}, "chunk_length_s"),
        ({"chunk_length_s": 31}, "chunk_length_s"),
        ({"task": "summarize"}, "task"),
        ({"assisted": "perhaps"}, "assisted"),
        ({"num_speakers": 0}, "num_speakers"),
        ({"min_speakers": -1}, "min_speakers"),
        ({"sampling_rate": 10}, "sampling_rate"),
        ({"return_timestamps": "char"}, "return_timestamps"),
        ({"return_timestamps": False}, "return_timestamps"),
        ({"num_beams": 0}, "num_beams"),
    ],
)
def test_bad_values_name_the_parameter(parameters, named):
    with pytest.raises(InvalidRequestError, match=named):
        parse_parameters(parameters)


def test_parameters_must_be_an_object():
    with pytest.raises(InvalidRequestError, match="must be a JSON object"):
        parse_parameters(["task", "translate"])


def test_min_above_max_speakers():
    with pytest.raises(InvalidRequestError, match=r"^invalid parameters: min_speakers \(3\) is greater than max_speakers \(2\)$"):
        parse_parameters({"min_speakers": 3, "max_speakers": 2})


@pytest.mark.parametrize("hints", [{"num_speakers": 1, "min_speakers": 2}, {"num_speakers": 5, "max_speakers": 4}])
def test_num_speakers_contradicting_bounds(hints):
    with pytest.raises(InvalidRequestError, match="num_speakers"):
        parse_parameters(hints)


def test_timestamps_true_means_segment_level():
    assert InferenceConfig(return_timestamps=True).return_timestamps == "segment"


def test_assisted_without_assistant_is_refused():
    config = InferenceConfig(assisted=True, batch_size=1)
    with pytest.raises(InvalidRequestError, match="ASSISTANT_MODEL"):
        resolve_request(config, ModelCapabilities(multilingual=True, language_codes=frozenset({"en"})))


def test_assisted_runs_with_batch_size_one_and_says_so():
    resolved = resolve_request(InferenceConfig(assisted=True, batch_size=8), MULTILINGUAL)
    assert resolved.config.batch_size == 1
    assert any("batch_size 8 was reduced to 1" in warning for warning in resolved.warnings)


def test_assisted_beam_search_is_refused():
    with pytest.raises(InvalidRequestError, match="num_beams"):
        resolve_request(InferenceConfig(assisted=True, num_beams=4), MULTILINGUAL)


def test_translate_on_english_only_model():
    with pytest.raises(InvalidRequestError, match="English-only"):
        resolve_request(InferenceConfig(task="translate"), ENGLISH_ONLY)


def test_languages_by_code_name_or_token():
    assert resolve_request(InferenceConfig(language="German"), MULTILINGUAL).config.language == "de"
    assert resolve_request(InferenceConfig(language="<|fr|>"), MULTILINGUAL).config.language == "fr"
    assert resolve_request(InferenceConfig(language="en"), ENGLISH_ONLY).config.language == "en"


def test_unknown_language_lists_the_known_ones():
    with pytest.raises(InvalidRequestError, match="unknown language 'xx'.*de, en, fr"):
        resolve_request(InferenceConfig(language="xx"), MULTILINGUAL)


def test_non_english_on_english_only_model():
    with pytest.raises(InvalidRequestError, match="English-only"):
        resolve_request(InferenceConfig(language="de"), ENGLISH_ONLY)


def test_speaker_hints_without_diarization_warn_and_are_dropped():
    resolved = resolve_request(InferenceConfig(num_speakers=2), ENGLISH_ONLY)
    assert resolved.config.num_speakers is None
    assert resolved.warnings == ["num_speakers ignored: no diarization model is loaded (set DIARIZATION_MODEL)"]


def test_speaker_hints_are_passed_as_given():
    config = InferenceConfig(min_speakers=2, max_speakers=4)
    assert resolve_request(config, MULTILINGUAL).config.speaker_hints == {"min_speakers": 2, "max_speakers": 4}


def test_diarize_follows_the_loaded_model_unless_the_request_says():
    assert resolve_request(InferenceConfig(), MULTILINGUAL).config.diarize is True
    assert resolve_request(InferenceConfig(), ENGLISH_ONLY).config.diarize is False
    off = resolve_request(InferenceConfig(diarize=False, num_speakers=2), MULTILINGUAL)
    assert off.config.diarize is False and off.config.num_speakers is None
    assert off.warnings == ["num_speakers ignored: diarize=false"]
    with pytest.raises(InvalidRequestError, match="DIARIZATION_MODEL"):
        resolve_request(InferenceConfig(diarize=True), ENGLISH_ONLY)


def test_prompt_blank_is_none_and_overlong_is_refused():
    assert resolve_request(InferenceConfig(prompt="  "), MULTILINGUAL).config.prompt is None
    assert resolve_request(InferenceConfig(prompt="Kubernetes, kubectl"), MULTILINGUAL).config.prompt == "Kubernetes, kubectl"
    with pytest.raises(InvalidRequestError, match="'prompt'"):
        parse_parameters({"prompt": "x" * 2001})


def test_max_audio_seconds_from_env(monkeypatch):
    assert ModelSettings().max_audio_seconds == 3 * 3600
    monkeypatch.setenv("MAX_AUDIO_SECONDS", "60")
    assert ModelSettings().max_audio_seconds == 60
    monkeypatch.setenv("MAX_AUDIO_SECONDS", "0")
    with pytest.raises(ValueError, match="max_audio_seconds"):
        ModelSettings()


def test_server_settings_from_env_and_key_hidden(monkeypatch):
    defaults = ServerSettings()
    assert (defaults.api_key, defaults.max_queue, defaults.request_timeout_s) == (None, 16, None)
    assert defaults.max_upload_bytes == 100 * 1024 * 1024
    monkeypatch.setenv("API_KEY", "sk-very-secret")
    monkeypatch.setenv("MAX_UPLOAD_MB", "0.5")
    monkeypatch.setenv("MAX_QUEUE", "0")
    monkeypatch.setenv("REQUEST_TIMEOUT_S", "")
    settings = ServerSettings()
    assert settings.api_key.get_secret_value() == "sk-very-secret" and "sk-very-secret" not in repr(settings)
    assert settings.max_upload_bytes == 512 * 1024 and settings.max_queue == 0 and settings.request_timeout_s is None
    monkeypatch.setenv("MAX_QUEUE", "-1")
    with pytest.raises(ValueError, match="max_queue"):
        ServerSettings()


@pytest.mark.parametrize("value", ["auto", "", " AUTO "])
def test_live_capacity_left_to_the_server_by_auto_or_nothing(monkeypatch, value):
    assert (ServerSettings().live_max_sessions, ServerSettings().live_lookahead_s) == (None, None)
    monkeypatch.setenv("LIVE_MAX_SESSIONS", value)
    monkeypatch.setenv("LIVE_LOOKAHEAD_S", value)
    assert (ServerSettings().live_max_sessions, ServerSettings().live_lookahead_s) == (None, None)
    monkeypatch.setenv("LIVE_MAX_SESSIONS", "3")
    monkeypatch.setenv("LIVE_LOOKAHEAD_S", "0")
    assert (ServerSettings().live_max_sessions, ServerSettings().live_lookahead_s) == (3, 0.0)
    monkeypatch.setenv("LIVE_MAX_SESSIONS", "two")
    with pytest.raises(ValueError, match="live_max_sessions"):
        ServerSettings()


def test_attribution_defaults_to_words_when_diarizing():
    assert resolve_request(InferenceConfig(), MULTILINGUAL).config.attribution == "word"
    assert resolve_request(InferenceConfig(attribution="segment"), MULTILINGUAL).config.attribution == "segment"
    undiarized = resolve_request(InferenceConfig(attribution="segment"), ENGLISH_ONLY)
    assert undiarized.config.attribution is None and undiarized.warnings == ["attribution ignored: this request is not diarized"]
    with pytest.raises(InvalidRequestError, match="attribution"):
        parse_parameters({"attribution": "sentence"})


def test_assisted_auto_is_the_default_with_an_assistant():
    assert resolve_request(InferenceConfig(), MULTILINGUAL).config.assisted == "auto"
    assert resolve_request(InferenceConfig(assisted="auto"), ENGLISH_ONLY).config.assisted is False
    assert resolve_request(InferenceConfig(num_beams=4), MULTILINGUAL).config.assisted is False, "beam search never drafts"
    assert resolve_request(InferenceConfig(assisted=False), MULTILINGUAL).config.assisted is False
    forced = resolve_request(InferenceConfig(assisted=True), MULTILINGUAL)
    assert forced.config.assisted is True and forced.config.batch_size == 1
    with pytest.raises(InvalidRequestError, match="assisted"):
        parse_parameters({"assisted": "sometimes"})
    assert ModelSettings().assisted_max_seconds == 30.0


def test_bounded_work_lowers_the_batch_first_and_the_beams_only_beyond_the_bound():
    from speaker_transcripts.config import CPU_BATCH, WORD_TIMED_BATCH, bounded_work

    chosen = InferenceConfig(batch_size=256, return_timestamps="word")
    bounded = bounded_work(chosen, max_batch_items=48)
    assert bounded.config.batch_size == 12 and bounded.warnings == [
        "batch_size 256 was reduced to 12 to bound memory (MAX_BATCH_ITEMS=48)"
    ]
    default = bounded_work(InferenceConfig(return_timestamps="word"), max_batch_items=48)
    assert default.config.batch_size == 4 and default.warnings == [], "a word-timed default batch is WORD_TIMED_BATCH, silently"
    beams = bounded_work(InferenceConfig(num_beams=16, return_timestamps="word"), max_batch_items=48)
    assert (beams.config.num_beams, beams.config.batch_size) == (6, 1)
    assert beams.warnings == ["num_beams 16 was reduced to 6 to bound memory (MAX_BATCH_ITEMS=48)"]
    segment_beams = bounded_work(InferenceConfig(num_beams=16), max_batch_items=48)
    assert (segment_beams.config.num_beams, segment_beams.config.batch_size, segment_beams.warnings) == (16, 1, [])
    four_beams = bounded_work(InferenceConfig(num_beams=4, batch_size=8), max_batch_items=48)
    assert (four_beams.config.num_beams, four_beams.config.batch_size) == (4, 6)
    segment = bounded_work(InferenceConfig(), max_batch_items=48)
    assert segment.config.batch_size == 24 and segment.warnings == []
    on_cpu = bounded_work(InferenceConfig(), max_batch_items=48, on_cpu=True)
    assert on_cpu.config.batch_size == CPU_BATCH and on_cpu.warnings == [], "a CPU's default batch bounds its peak, silently"
    chosen_on_cpu = bounded_work(InferenceConfig(batch_size=24), max_batch_items=48, on_cpu=True)
    assert chosen_on_cpu.config.batch_size == 24, "a batch the client chose stands"
    word_on_cpu = bounded_work(InferenceConfig(return_timestamps="word"), max_batch_items=48, on_cpu=True)
    assert word_on_cpu.config.batch_size == WORD_TIMED_BATCH


def test_token_budget_scales_whispers_own_budget_to_the_window():
    from speaker_transcripts.config import token_budget

    assert token_budget(1.0) == 31 and token_budget(5.0) == 91
    assert token_budget(30.0) is None and token_budget(29.0) is None, "full-size windows keep Whisper's default"
    budgets = {seconds / 2: token_budget(seconds / 2) for seconds in range(1, 61)}
    assert all(budget is None or budget >= window * 448 / 30 for window, budget in budgets.items())
    assert all(budget is not None for window, budget in budgets.items() if window <= 27)


CLIP = "UklGRg=="  # any base64: clips are decoded by the transcriber, not here
EMBEDDING = ModelCapabilities(multilingual=True, language_codes=frozenset({"en"}), has_diarization=True, embeds_speakers=True)


def known(*names: str) -> dict:
    return {"known_speakers": [{"name": name, "audio": CLIP} for name in names]}


def test_known_speakers_are_parsed_and_names_trimmed():
    config, _ = parse_parameters(known(" Alice ", "Bob"))
    assert [speaker.name for speaker in config.known_speakers] == ["Alice", "Bob"]
    assert CLIP not in repr(config), "clips stay out of reprs and logs"
    assert resolve_request(config, EMBEDDING).config.known_speakers == config.known_speakers


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (known(""), "name is empty"),
        (known("x" * 65), "has 65 characters; at most 64"),
        (known("Alice", "alice"), "cannot be told apart"),
        (known("Ali\u200bce"), "control or unassigned characters"),  # a zero-width space (a line break is one space)
        (known("SPEAKER_01"), "how anonymous speakers are labelled"),
        (known(*[f"P{index}" for index in range(9)]), "holds 9 items; at most 8"),
        ({"known_speakers": [{"name": "Alice"}]}, "known_speakers.0.audio"),
        ({"known_speakers": [{"name": "Alice", "audio": ""}]}, "at least 1 character"),
        ({"known_speakers": [{"name": "Alice", "audio": CLIP, "voice": 1}]}, "Extra inputs are not permitted"),
        ({"known_speakers": "Alice"}, "known_speakers"),
    ],
)
def test_unusable_known_speakers_are_refused_with_the_reason(parameters, message):
    with pytest.raises(InvalidRequestError, match=message):
        parse_parameters(parameters)


@pytest.mark.parametrize("parameters", [known("Alice"), {"return_speaker_embeddings": True}])
def test_naming_and_embeddings_need_a_pipeline_that_embeds(parameters):
    config, _ = parse_parameters(parameters)
    with pytest.raises(InvalidRequestError, match="needs a diarization model; set DIARIZATION_MODEL"):
        resolve_request(config, ENGLISH_ONLY)
    with pytest.raises(InvalidRequestError, match="needs a diarization pipeline with a speaker-embedding model"):
        resolve_request(config, MULTILINGUAL)
    off, _ = parse_parameters({**parameters, "diarize": False})
    with pytest.raises(InvalidRequestError, match="do not send diarize=false"):
        resolve_request(off, EMBEDDING)
    assert resolve_request(config, EMBEDDING).config.diarize is True


@pytest.mark.parametrize(("parameters", "words"), [
    ({}, True),  # diarized by default, word attribution by default: the words exist anyway
    ({"diarize": True, "attribution": "word"}, True),
    ({"diarize": False}, False),  # word times would cost an alignment pass here
    ({"attribution": "segment"}, False),
    ({"task": "diarize"}, False),  # no words at all
])
def test_subtitles_ask_for_word_times_only_where_they_come_free(parameters, words):
    before = dict(parameters)
    assert (timed_by_words(parameters, EMBEDDING).get("return_timestamps") == "word") is words
    assert timed_by_words({}, ENGLISH_ONLY) == {}, "no diarization model: nothing changes"
    assert timed_by_words({"diarize": True}, ENGLISH_ONLY) == {"diarize": True}, "left for the handler to refuse"
    assert parameters == before, "the caller's dict is left alone"


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (["Reader A", "Reader\u00a0A"], "cannot be told apart"),  # a no-break space is a space
        (["Reader A", "reader_a"], "cannot be told apart"),  # RTTM would write both Reader_A
        (["SPEAKER_O1"], "looks like, how anonymous speakers"),  # the letter O
        (["SPEAKER_00\u0301"], "looks like, how anonymous speakers"),  # a combining mark
    ],
)
def test_known_speaker_names_that_cannot_be_told_apart_are_refused(names, problem):
    with pytest.raises(InvalidRequestError, match=problem):
        parse_parameters({"known_speakers": [{"name": name, "audio": "AAAA"} for name in names]})


def test_known_speaker_names_are_normalised_and_a_long_list_is_refused_before_its_items():
    config, _ = parse_parameters({"known_speakers": [{"name": " Ann\u2028 Lee\u00a0 ", "audio": "AAAA"}]})
    assert config.known_speakers[0].name == "Ann Lee"  # one space, no line separator for a subtitle to break on
    with pytest.raises(InvalidRequestError) as refused:
        parse_parameters({"known_speakers": [{"name": "x" * 100, "audio": ""}] * 20_000})
    assert str(refused.value) == "parameter 'known_speakers' holds 20000 items; at most 8"


def test_the_voice_library_people_a_request_chooses_are_names_checked_like_known_speakers():
    config, _ = parse_parameters({"voices": [" Ann\u00a0Lee ", "Ann Lee", "Bo"]})
    assert config.voices == ("Ann Lee", "Bo")  # normalised, each once
    assert parse_parameters({})[0].voices is None and parse_parameters({"voices": []})[0].voices == ()
    with pytest.raises(InvalidRequestError, match="how anonymous speakers are labelled"):
        parse_parameters({"voices": ["SPEAKER_O1"]})
    with pytest.raises(InvalidRequestError, match="'voices' holds 300 items; at most 256"):
        parse_parameters({"voices": ["x"] * 300})
    resolved = resolve_request(parse_parameters({"voices": ["Bo"], "diarize": False})[0], EMBEDDING)
    assert resolved.config.voices is None and any(warning.startswith("voices ignored") for warning in resolved.warnings)
    assert resolve_request(parse_parameters({"voices": ["Bo"]})[0], EMBEDDING).config.voices == ("Bo",)


def test_a_400_names_a_few_problems_and_counts_the_rest():
    with pytest.raises(InvalidRequestError) as refused:
        parse_parameters({name: "?" for name in ("task", "batch_size", "long_form", "chunk_length_s", "num_beams", "return_timestamps", "diarize")})
    assert str(refused.value).count("parameter '") == 5 and str(refused.value).endswith("and 2 more problems")


def test_a_container_on_endpoints_serves_the_whisper_checkpoint_mounted_at_hf_model_dir(tmp_path, monkeypatch):
    repository = _fake_checkpoint(tmp_path / "repository")
    monkeypatch.setenv("HF_MODEL_DIR", str(repository))
    assert ModelSettings.self_hosted().asr_model == str(repository)
    monkeypatch.setenv("ASR_MODEL", "whisper-tiny.en")  # the environment still decides
    assert ModelSettings.self_hosted().asr_model == "whisper-tiny.en"
    monkeypatch.delenv("ASR_MODEL")
    monkeypatch.setenv("HF_MODEL_DIR", str(_fake_checkpoint(tmp_path / "other", model_type="bert")))
    assert ModelSettings.self_hosted().asr_model == SELF_HOSTED_ASR_MODEL  # not a Whisper checkpoint: the embedded one
