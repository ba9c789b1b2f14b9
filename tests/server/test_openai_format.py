"""OpenAI response shapes built from handler responses (no models, no server)."""

from __future__ import annotations

from speaker_transcripts.server.openai_format import (
    diarized_json,
    language_name,
    render_text,
    return_timestamps_for,
    verbose_json,
)

WORDS = {
    "text": " Hi there. Bye",
    "chunks": [
        {"text": " Hi", "timestamp": [0.0, 0.3], "speaker": "A"},
        {"text": " there.", "timestamp": [0.3, 0.8], "speaker": "A"},
        {"text": " Bye", "timestamp": [2.5, 2.9], "speaker": "B"},
    ],
    "speakers": [
        {"speaker": "A", "text": "Hi there.", "timestamp": [0.0, 0.8]},
        {"speaker": "B", "text": "Bye", "timestamp": [2.5, 2.9]},
    ],
    "language": "en",
    "duration": 3.0,
    "warnings": ["something adjusted"],
}
UNDIARIZED_WORDS = {**WORDS, "speakers": [], "chunks": [{k: v for k, v in c.items() if k != "speaker"} for c in WORDS["chunks"]]}


def test_granularity_picks_the_pipeline_timestamps():
    assert return_timestamps_for([]) == "segment"
    assert return_timestamps_for(["segment"]) == "segment"
    assert return_timestamps_for(["word"]) == return_timestamps_for(["segment", "word"]) == "word"


def test_verbose_json_with_speakers_and_words():
    body = verbose_json(WORDS, "transcribe", ["word", "segment"]).model_dump(exclude_none=True)
    assert body["language"] == "english" and body["duration"] == 3.0 and body["warnings"] == ["something adjusted"]
    assert [(s["id"], s["speaker"], s["text"]) for s in body["segments"]] == [(0, "A", "Hi there."), (1, "B", "Bye")]
    assert [(w["word"], w["speaker"]) for w in body["words"]] == [(" Hi", "A"), (" there.", "A"), (" Bye", "B")]


def test_words_only_leaves_segments_out():
    body = verbose_json(WORDS, "transcribe", ["word"]).model_dump(exclude_none=True)
    assert "segments" not in body and len(body["words"]) == 3


def test_undiarized_words_are_grouped_into_segments_without_speakers():
    body = verbose_json(UNDIARIZED_WORDS, "translate", ["word", "segment"]).model_dump(exclude_none=True)
    assert body["task"] == "translate"
    assert [(s["text"], s["start"], s["end"]) for s in body["segments"]] == [("Hi there.", 0.0, 0.8), ("Bye", 2.5, 2.9)]
    assert all("speaker" not in segment for segment in body["segments"] + body["words"])


def test_segment_level_chunks_are_the_segments():
    result = {**UNDIARIZED_WORDS, "chunks": [{"text": " Hi there.", "timestamp": [0.0, 0.8]}]}
    body = verbose_json(result, "transcribe", []).model_dump(exclude_none=True)
    assert [s["text"] for s in body["segments"]] == [" Hi there."] and "words" not in body


def test_diarized_json_and_text_formats():
    body = diarized_json(WORDS, "transcribe").model_dump()
    assert [(s["id"], s["speaker"], s["type"]) for s in body["segments"]] == [
        ("seg_0", "A", "transcript.text.segment"), ("seg_1", "B", "transcript.text.segment")]
    assert render_text(WORDS, "text") == " Hi there. Bye\n"
    assert render_text(WORDS, "srt").startswith("1\n00:00:00,000 --> 00:00:00,800\nA: Hi there.\n")
    assert "<v B>Bye</v>" in render_text(WORDS, "vtt")


def test_language_names():
    assert language_name("de") == "german" and language_name(None) is None and language_name("xx") == "xx"
