"""Property-based tests: whatever arrives, the parsers, validation, merge and writers either work or
say what is wrong; and schemathesis drives the server from its own OpenAPI schema without a 500.

Example counts are set per test below (``FUZZ_EXAMPLES`` scales them up for a long run:
``FUZZ_EXAMPLES=5000 python -m pytest tests/test_fuzz.py``).
"""

from __future__ import annotations

import io
import math
import os
from itertools import pairwise

import schemathesis
import srt
import webvtt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from speaker_transcripts.config import parse_parameters
from speaker_transcripts.errors import InvalidRequestError
from speaker_transcripts.output.formats import Cue, to_srt, to_vtt
from speaker_transcripts.pipeline.audio import decode_inputs
from speaker_transcripts.pipeline.diarization import UNKNOWN_SPEAKER, Turn, group_by_speaker, word_speakers
from speaker_transcripts.pipeline.transcript import MAX_PAUSE_IN_SEGMENT_S, MAX_SEGMENT_S, SENTENCE_ENDINGS, Chunk

SCALE = int(os.environ.get("FUZZ_EXAMPLES", "1"))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)
parameter_names = st.sampled_from([
    "task", "batch_size", "assisted", "chunk_length_s", "sampling_rate", "language", "num_speakers", "min_speakers",
    "max_speakers", "return_timestamps", "num_beams", "diarize", "attribution", "prompt", "unknown",
])


@settings(max_examples=300 * SCALE, deadline=None)
@given(st.dictionaries(parameter_names, json_values, max_size=6) | json_values)
def test_parameters_validate_or_explain(parameters):
    try:
        config, warnings = parse_parameters(parameters)
    except InvalidRequestError as error:
        assert str(error)
        return
    assert isinstance(warnings, list) and 1 <= config.batch_size <= 256 and 1 <= config.chunk_length_s <= 30


@settings(max_examples=300 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048) | st.text(max_size=256) | st.lists(st.floats(allow_nan=True, width=32), max_size=64)
       | st.fixed_dictionaries({"array": st.lists(st.floats(width=32), max_size=64), "sampling_rate": json_values}))
def test_any_payload_decodes_or_explains(inputs):
    try:
        audio = decode_inputs(inputs, max_seconds=60)
    except InvalidRequestError as error:
        assert str(error)
        return
    assert audio.samples.dtype.name == "int16" and audio.samples.ndim == 1 and audio.samples.size > 0


times = st.floats(min_value=0, max_value=120, allow_nan=False)


@st.composite
def words_and_turns(draw):
    starts = sorted(draw(st.lists(times, max_size=25)))
    words = [Chunk(draw(st.sampled_from([" a", " b.", " c?", "  ", " d,"])), start, start + draw(st.floats(0, 2))) for start in starts]
    turns = []
    for _ in range(draw(st.integers(0, 6))):
        start = draw(times)
        turns.append(Turn(draw(st.sampled_from(["A", "B", "C"])), start, start + draw(st.floats(0, 30))))
    return words, turns


@settings(max_examples=300 * SCALE, deadline=None)
@given(words_and_turns())
def test_every_word_gets_one_speaker_and_none_is_lost(case):
    words, turns = case
    speakers = word_speakers(words, turns)
    assert len(speakers) == len(words)
    assert set(speakers) <= ({turn.speaker for turn in turns} or {UNKNOWN_SPEAKER})
    segments = group_by_speaker(words, speakers)
    assert "".join(s.text for s in segments).replace(" ", "") == "".join(w.text for w in words).replace(" ", "")
    # one speaker's neighbouring segments are split only where a sentence, a pause or the length cap says
    assert all(
        a.speaker != b.speaker or a.text.endswith(SENTENCE_ENDINGS) or b.start - a.end > MAX_PAUSE_IN_SEGMENT_S
        or b.end - a.start > MAX_SEGMENT_S
        for a, b in pairwise(segments)
    )


any_time = st.floats(allow_nan=True, allow_infinity=True) | st.none()


@settings(max_examples=200 * SCALE, deadline=None)
@given(st.lists(st.tuples(any_time, any_time, st.text(max_size=40), st.none() | st.text(min_size=1, max_size=12)), max_size=8))
def test_subtitle_writers_always_write_parseable_files(raw):
    from speaker_transcripts.output.formats import cues_from_result

    result = {"chunks": [{"text": text, "timestamp": [start, end], "speaker": speaker} for start, end, text, speaker in raw],
              "speakers": []}
    cues = cues_from_result(result)
    assert all(isinstance(c, Cue) and 0 <= c.start <= c.end and math.isfinite(c.end) for c in cues)
    parsed = list(srt.parse(to_srt(cues)))
    assert len(parsed) == len(cues)
    assert all(subtitle.end > subtitle.start for subtitle in parsed)
    assert len(list(webvtt.from_buffer(io.StringIO(to_vtt(cues))))) == len(cues)


# --- schemathesis against the running server ---------------------------------------------------


def fuzz_operation(operation, server_url: str, calls: dict[str, int]) -> None:
    label = f"{operation.method.upper()} {operation.path}"

    @settings(max_examples=40 * SCALE, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(operation.as_strategy())
    def call(case):
        response = case.call(base_url=server_url, timeout=120)
        calls[label] = calls.get(label, 0) + 1
        assert response.status_code < 500, f"{label}: {response.status_code} {response.text[:300]}"

    call()


def test_server_never_answers_500(server_url):
    """Every operation in the server's OpenAPI schema, with schemathesis-generated requests
    (valid and invalid bodies, forms, query strings): 4xx for what is wrong, never a 5xx."""
    schema = schemathesis.openapi.from_url(server_url + "/openapi.json")
    calls: dict[str, int] = {}
    for result in schema.get_all_operations():
        fuzz_operation(result.ok(), server_url, calls)
    assert set(calls) >= {"POST /", "POST /predict", "POST /v1/audio/transcriptions", "POST /v1/audio/translations", "GET /health"}
    print(f"schemathesis calls per operation: {calls}")


segment_text = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=60), min_size=1, max_size=40)


@settings(max_examples=200 * SCALE, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 600), st.floats(0, 40), segment_text, st.sampled_from(["A", "SPEAKER_00", None])), max_size=8))
def test_subtitle_cues_always_keep_the_rules_and_every_word(raw):
    from speaker_transcripts.output.formats import rule_breaks, subtitle_cues

    segments = sorted(raw, key=lambda item: item[0])
    result = {"chunks": [], "speakers": [
        {"speaker": speaker or "B", "text": " ".join(words), "timestamp": [start, start + length]}
        for start, length, words, speaker in segments
    ]}
    cues = subtitle_cues(result)
    assert rule_breaks(cues) == []
    written = "".join(cue.text.replace("\n", "").replace(" ", "") for cue in cues)
    assert written == "".join("".join(words) for _, _, words, _ in segments)
