"""Subtitle and text writers: golden output, edge cases, and real parsers reading what we write."""

from __future__ import annotations

import io
import json

import pytest
import srt
import webvtt

from speaker_transcripts.output.formats import (
    Cue,
    SubtitleRules,
    cues_from_result,
    render,
    rule_breaks,
    subtitle_cues,
    timestamp,
    to_srt,
    to_txt,
    to_vtt,
)

DIARIZED = {
    "text": " Hello there. Hi! How are you?",
    "chunks": [
        {"text": " Hello there.", "timestamp": [0.0, 1.5]},
        {"text": " Hi! How are you?", "timestamp": [1.5, 4.25]},
    ],
    "speakers": [
        {"speaker": "SPEAKER_00", "text": "Hello there.", "timestamp": [0.0, 1.5]},
        {"speaker": "SPEAKER_01", "text": "Hi! How are you?", "timestamp": [1.5, 4.25]},
    ],
}
PLAIN = {**DIARIZED, "speakers": []}

GOLDEN_SRT = """1
00:00:00,000 --> 00:00:01,500
SPEAKER_00: Hello there.

2
00:00:01,500 --> 00:00:04,250
SPEAKER_01: Hi! How are you?
"""

GOLDEN_VTT = """WEBVTT

00:00:00.000 --> 00:00:01.500
<v SPEAKER_00>Hello there.</v>

00:00:01.500 --> 00:00:04.250
<v SPEAKER_01>Hi! How are you?</v>
"""


def test_golden_srt_and_vtt_with_speakers():
    assert render(DIARIZED, "srt") == GOLDEN_SRT
    assert render(DIARIZED, "vtt") == GOLDEN_VTT


def test_without_speakers_the_chunks_are_the_cues():
    assert render(PLAIN, "txt") == "Hello there.\nHi! How are you?\n"
    assert render(PLAIN, "srt").splitlines()[2] == "Hello there."
    assert "<v " not in render(PLAIN, "vtt")


def test_txt_and_json():
    assert render(DIARIZED, "txt") == "SPEAKER_00: Hello there.\nSPEAKER_01: Hi! How are you?\n"
    assert json.loads(render(DIARIZED, "json")) == DIARIZED
    with pytest.raises(ValueError, match="unknown output format"):
        render(DIARIZED, "docx")


@pytest.mark.parametrize(
    ("seconds", "srt_time", "vtt_time"),
    [
        (0, "00:00:00,000", "00:00:00.000"),
        (1.0004, "00:00:01,000", "00:00:01.000"),
        (1.0006, "00:00:01,001", "00:00:01.001"),
        (59.9996, "00:01:00,000", "00:01:00.000"),  # rounding carries into minutes
        (3599.9999, "01:00:00,000", "01:00:00.000"),
        (100 * 60 + 5.25, "01:40:05,250", "01:40:05.250"),  # past 99 minutes
        (101 * 3600, "101:00:00,000", "101:00:00.000"),  # past 99 hours, still unambiguous
        (-3.0, "00:00:00,000", "00:00:00.000"),
        (None, "00:00:00,000", "00:00:00.000"),
        (float("nan"), "00:00:00,000", "00:00:00.000"),
    ],
)
def test_timestamps(seconds, srt_time, vtt_time):
    assert timestamp(seconds, ",") == srt_time
    assert timestamp(seconds, ".") == vtt_time


def test_open_negative_and_instant_times_never_make_bad_cues():
    result = {"speakers": [], "chunks": [
        {"text": " starts late", "timestamp": [-0.5, None]},
        {"text": " instant", "timestamp": [2.0, 2.0]},
        {"text": "   ", "timestamp": [3.0, 4.0]},  # blank text is not a cue
        {"text": " backwards", "timestamp": [5.0, 4.0]},
    ]}
    cues = cues_from_result(result)
    assert [cue.text for cue in cues] == ["starts late", "instant", "backwards"]
    assert all(0 <= cue.start <= cue.end for cue in cues)
    for subtitle in srt.parse(to_srt(cues)):
        assert subtitle.end > subtitle.start


def test_vtt_escapes_reserved_characters_and_real_parsers_read_our_output():
    cues = [
        Cue(0.0, 1.0, "a <b> & c --> d", "Dr. <Who>"),
        Cue(1.0, 2.5, "line one\n\nline two"),
        Cue(3600.0, 3601.0, "an hour in"),
    ]
    vtt_text = to_vtt(cues_from_result({"chunks": [
        {"text": cue.text, "timestamp": [cue.start, cue.end], **({"speaker": cue.speaker} if cue.speaker else {})}
        for cue in cues
    ], "speakers": []}))
    assert "-->" not in vtt_text.replace(" --> ", "")
    assert "a &lt;b&gt; &amp; c --&gt; d" in vtt_text
    parsed = webvtt.from_buffer(io.StringIO(vtt_text))
    assert [caption.start for caption in parsed] == ["00:00:00.000", "00:00:01.000", "01:00:00.000"]
    assert parsed[1].text == "line one line two", "newlines inside a cue would end it"

    srt_text = to_srt(cues)
    subtitles = list(srt.parse(srt_text))
    assert [s.index for s in subtitles] == [1, 2, 3]
    assert subtitles[1].content == "line one\nline two", "a blank line inside a cue would end it"
    assert subtitles[0].content == "Dr. ‹Who›: a <b> & c --> d", "a label is not markup"
    assert subtitles[2].start.total_seconds() == 3600.0


def test_empty_transcript_renders_valid_empty_documents():
    empty = {"text": "", "chunks": [], "speakers": []}
    assert render(empty, "srt") == "" and render(empty, "txt") == ""
    assert render(empty, "vtt") == "WEBVTT\n"
    assert list(webvtt.from_buffer(io.StringIO(render(empty, "vtt")))) == []


def test_txt_writer_labels_only_diarized_cues():
    assert to_txt([Cue(0, 1, "hi", "A"), Cue(1, 2, "there")]) == "A: hi\nthere\n"


def test_found_by_fuzzing_rounding_and_huge_times():
    """An end that rounds onto its start still gets a later end; absurd times stay writable."""
    close = list(srt.parse(to_srt([Cue(0.0015, 0.0016, "x"), Cue(0.0025, 0.0025, "y")])))
    assert all(s.end > s.start for s in close)
    huge = to_vtt([Cue(1e308, 1e308, "far")])
    assert "-->" in huge and len(list(webvtt.from_buffer(io.StringIO(huge)))) == 1


LONG_TURN = {  # one speaker reading for 20 s: a segment no subtitle may show whole
    "text": "",
    "chunks": [],
    "speakers": [{
        "speaker": "SPEAKER_00",
        "text": "When the committee met on Tuesday it agreed to fund the new library, to repair the bridge "
                "over the river before winter, and to ask the county for a study of the bus routes. Then it adjourned.",
        "timestamp": [10.0, 30.0],
    }, {"speaker": "SPEAKER_01", "text": "Thanks.", "timestamp": [30.2, 30.5]}],
}


def test_a_long_segment_becomes_cues_that_keep_the_rules():
    cues = subtitle_cues(LONG_TURN)
    assert rule_breaks(cues) == []
    assert len(cues) >= 4 and cues[0].start == 10.0 and cues[-2].end == 30.0
    spoken = " ".join(cue.text.replace("\n", " ") for cue in cues[:-1])
    assert spoken == LONG_TURN["speakers"][0]["text"], "every word once, in order"
    assert all(len(cue.text.split("\n")) <= 2 for cue in cues)
    assert cues[-1].speaker == "SPEAKER_01", "a new speaker starts a new cue"
    assert cues[-2].text == "Then it adjourned.", "a sentence end ends a cue"


def test_short_cues_stay_up_long_enough_but_never_into_the_next():
    result = {"chunks": [], "speakers": [
        {"speaker": "A", "text": "Yes.", "timestamp": [1.0, 1.2]},
        {"speaker": "A", "text": "No.", "timestamp": [5.0, 5.3]},
        {"speaker": "B", "text": "Maybe.", "timestamp": [5.5, 6.0]},
        {"speaker": "B", "text": "Sure.", "timestamp": [6.1, 6.3]},
    ]}
    cues = subtitle_cues(result)
    assert [(cue.start, cue.end) for cue in cues] == [(1.0, 1.8), (5.0, 5.5), (5.5, 6.3)]
    assert cues[-1].text == "Maybe. Sure.", "a sentence too short to read alone joins the next one"
    assert rule_breaks(cues) == []
    assert rule_breaks([Cue(1.0, 1.2, "Yes."), Cue(5.0, 6.0, "No.")]) == [
        "cue 1: 0.20 s on screen, though the next cue leaves room"
    ]


def test_word_times_place_the_cue_boundaries():
    words = [(" One", 0.0, 0.4), (" two", 0.5, 0.9), (" three.", 1.0, 1.5), (" Four", 1.6, 2.0), (" five.", 2.1, 2.6)]
    result = {"speakers": [], "chunks": [{"text": t, "timestamp": [a, b], "speaker": "A"} for t, a, b in words]}
    result["speakers"] = [{"speaker": "A", "text": "One two three. Four five.", "timestamp": [0.0, 2.6]}]
    cues = subtitle_cues(result)
    assert [(cue.start, cue.end, cue.text) for cue in cues] == [(0.0, 1.5, "One two three."), (1.6, 2.6, "Four five.")]


def test_rules_are_parameters():
    cues = subtitle_cues(LONG_TURN, SubtitleRules(max_line_chars=20, max_lines=1, max_cue_s=3.0))
    assert rule_breaks(cues, SubtitleRules(max_line_chars=20, max_lines=1, max_cue_s=3.0)) == []
    assert all("\n" not in cue.text and len(cue.text) <= 20 for cue in cues if cue.speaker is None)
    with pytest.raises(ValueError, match="unusable subtitle rules"):
        SubtitleRules(min_cue_s=8.0)


def test_txt_reads_as_prose():
    words = [(" Hello", 0.0, 0.4), (" there.", 0.5, 0.9), (" How", 1.0, 1.2), (" are", 1.2, 1.4), (" you?", 1.4, 1.6)]
    plain = {"speakers": [], "chunks": [{"text": t, "timestamp": [a, b]} for t, a, b in words]}
    assert render(plain, "txt") == "Hello there.\nHow are you?\n"
    diarized = {"chunks": [], "speakers": [
        {"speaker": "A", "text": "Hello there.", "timestamp": [0.0, 0.9]},
        {"speaker": "A", "text": "How are you?", "timestamp": [1.0, 1.6]},
        {"speaker": "B", "text": "Fine.", "timestamp": [2.0, 2.4]},
    ]}
    assert render(diarized, "txt") == "A: Hello there. How are you?\nB: Fine.\n"


def test_rttm_is_the_timeline_with_overlaps_and_a_real_reader_loads_it(tmp_path):
    from pyannote.database.util import load_rttm

    result = {**DIARIZED, "diarization": [
        {"speaker": "Ann Lee", "start": 0.0, "end": 2.5}, {"speaker": "SPEAKER_01", "start": 2.0, "end": 4.25},
    ]}
    document = render(result, "rttm", uri="weekly meeting")
    assert document == (
        "SPEAKER weekly_meeting 1 0.000 2.500 <NA> <NA> Ann_Lee <NA> <NA>\n"
        "SPEAKER weekly_meeting 1 2.000 2.250 <NA> <NA> SPEAKER_01 <NA> <NA>\n"
    )
    (tmp_path / "a.rttm").write_text(document)
    annotation = load_rttm(tmp_path / "a.rttm")["weekly_meeting"]
    assert annotation.label_duration("Ann_Lee") == 2.5
    assert annotation.get_overlap().duration() == pytest.approx(0.5), "the overlap is kept"
    with pytest.raises(ValueError, match="needs a diarized result"):
        render(DIARIZED, "rttm")


def test_a_speaker_name_with_markup_is_shown_not_obeyed_in_srt_and_vtt():
    named = {**DIARIZED, "speakers": [{"speaker": "<b>Ann</b> {\\an8}", "text": " Hello there.", "timestamp": [0.0, 1.5]}]}
    (cue,) = srt.parse(render(named, "srt"))
    assert cue.content == "‹b›Ann‹/b› (\\an8): Hello there."
    (caption,) = webvtt.from_buffer(io.StringIO(render(named, "vtt")))
    assert caption.voice == "&lt;b&gt;Ann&lt;/b&gt; {\\an8}" and caption.text == "Hello there.", "escaped, not markup"
    assert json.loads(render(named, "json"))["speakers"][0]["speaker"] == "<b>Ann</b> {\\an8}", "JSON keeps names verbatim"


def test_a_blink_of_a_cue_takes_time_from_the_next_one_when_that_one_can_spare_it():
    result = {"text": "", "chunks": [
        {"text": " Oh,", "timestamp": [1.0, 1.02], "speaker": "B"},
        {"text": " I", "timestamp": [1.02, 1.3], "speaker": "A"}, {"text": " see", "timestamp": [1.3, 4.0], "speaker": "A"},
    ], "speakers": [{"speaker": "B", "text": " Oh,", "timestamp": [1.0, 1.02]},
                    {"speaker": "A", "text": " I see", "timestamp": [1.02, 4.0]}]}
    oh, answer = subtitle_cues(result)
    rules = SubtitleRules()
    assert (oh.start, oh.end) == (1.0, 1.0 + rules.min_cue_s) and answer.start == oh.end and answer.end == 4.0
    assert rule_breaks([oh, answer]) == []
    squeezed = {**result, "chunks": [{**chunk, "timestamp": [min(t, 1.5) for t in chunk["timestamp"]]} for chunk in result["chunks"]]}
    first, second = subtitle_cues(squeezed)
    assert first.end <= second.start and second.end - second.start >= 0.0, "never overlapping, even when nobody can spare time"


def test_a_sentence_is_not_left_with_one_word_on_a_cue_of_its_own():
    words = "Then I opened the settings page, and the whole thing just froze solid on the screen."  # 2 x 42 + "screen."
    times = [(index * 0.3, index * 0.3 + 0.25) for index in range(len(words.split()))]
    result = {"text": words, "speakers": [], "chunks": [
        {"text": f" {word}", "timestamp": list(span)} for word, span in zip(words.split(), times, strict=True)
    ]}
    cues = subtitle_cues(result)
    assert [cue.text.split()[-1] for cue in cues] == ["on", "screen."] and len(cues[1].text.split()) == 2, cues
    assert " ".join(" ".join(cue.text.split()) for cue in cues) == words, "every word once, in order"
    assert rule_breaks(cues) == []


def test_word_timed_cues_keep_whispers_spelling_and_spacing():
    """Whisper's words "5" and "%" (no space before it) are "5%" on screen, as in the text."""
    from speaker_transcripts.output.formats import subtitle_cues

    words = [(" Growth", 0.0, 0.4), (" was", 0.4, 0.6), (" 5", 0.6, 0.8), ("%", 0.8, 0.9), (" this", 0.9, 1.1), (" year's", 1.1, 1.5), (".", 1.5, 1.5)]
    result = {"text": "Growth was 5% this year's.", "chunks": [{"text": text, "timestamp": [start, end], "speaker": "A"} for text, start, end in words],
              "speakers": [{"speaker": "A", "text": "Growth was 5% this year's.", "timestamp": [0.0, 1.5]}]}
    (cue,) = subtitle_cues(result)
    assert cue.text.replace("\n", " ") == "Growth was 5% this year's."


def test_a_webvtt_voice_span_takes_no_room_on_the_line():
    """SRT shows "SPEAKER_00: " on the first line, so it counts; WebVTT's <v SPEAKER_00> is not shown
    as text, so a line of exactly 42 characters stays one line there."""
    from speaker_transcripts.output.formats import render

    text = "abcdefghi " * 4 + "ab"  # 42 characters
    words = text.split()
    step = 0.3
    chunks = [{"text": f" {word}", "timestamp": [index * step, (index + 1) * step], "speaker": "SPEAKER_00"} for index, word in enumerate(words)]
    result = {"text": text, "chunks": chunks, "speakers": [{"speaker": "SPEAKER_00", "text": text, "timestamp": [0.0, len(words) * step]}]}
    vtt = render(result, "vtt")
    assert f"<v SPEAKER_00>{text}</v>" in vtt, vtt
    srt = render(result, "srt")
    assert "SPEAKER_00: " in srt and text not in srt.replace("SPEAKER_00: ", ""), srt


def test_a_long_name_is_shortened_in_cues_and_the_words_stay_whole():
    from speaker_transcripts.output.formats import render, rule_breaks, subtitle_cues

    name = "Dr. Maximiliana Theodora Featherstonehaugh-Smythe"  # 49 characters, within the 64 allowed
    text = "Go forward ten meters and then turn left at the second crossing."
    words = text.split()
    chunks = [{"text": f" {word}", "timestamp": [index * 0.4, (index + 1) * 0.4], "speaker": name} for index, word in enumerate(words)]
    result = {"text": text, "chunks": chunks, "speakers": [{"speaker": name, "text": text, "timestamp": [0.0, len(words) * 0.4]}]}
    srt = render(result, "srt")
    shown = [line.split(": ", 1)[-1] for line in srt.splitlines() if line and not line[0].isdigit()]
    assert " ".join(shown).split() == words, srt  # every word whole, none cut into pieces
    assert "Dr. Maximiliana The…: " in srt and rule_breaks(subtitle_cues(result)) == []
    assert render(result, "txt").startswith(f"{name}: Go forward")  # prose keeps the whole name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("meet him. Oh, hello. I didn't know you were here", ["meet him. Oh, hello.", "I didn't know you were here"]),
        ("here already. We had a long talk about the plan", ["here already. We had", "a long talk about the plan"]),
        ("It was late, and the trains had stopped, so we", ["It was late, and the trains", "had stopped, so we"]),
    ],
    ids=["not after 'I'", "not after 'a'", "not after 'the'"],
)
def test_two_lines_are_balanced_and_break_where_a_reader_would(text, expected):
    """A line that ends on "I" or "a" strands it from what it belongs to, even when the widths are more even."""
    from speaker_transcripts.output.formats import _wrapped

    lines = _wrapped(text.split(), None, SubtitleRules(), label_shown=False)
    assert lines == expected
    assert all(line.split()[-1].lower() not in ("i", "a", "an", "the") for line in lines)
