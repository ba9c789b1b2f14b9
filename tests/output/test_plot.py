"""The speaker timeline: rows of at most a minute, a lane per speaker, text only where it fits."""

from __future__ import annotations

import struct

from speaker_transcripts.output.plot import CHARACTER_IN, _fitting, overlapped_spans, plot_timeline
from speaker_transcripts.pipeline.diarization import Turn


def png_size(path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def diarized(duration: float) -> dict:
    segments = [{"speaker": f"SPEAKER_0{n % 3}", "text": f"Sentence number {n}.", "timestamp": [n * 4.0, n * 4.0 + 3.0]}
                for n in range(int(duration // 4))]
    return {"speakers": segments, "chunks": [], "duration": duration}


def test_long_audio_wraps_into_rows_and_the_page_stays_readable(tmp_path):
    sizes = {seconds: png_size(plot_timeline(diarized(seconds), tmp_path / f"{seconds}.png")) for seconds in (30, 60, 600)}
    assert {width for width, _ in sizes.values()} == {1400}, "one page width, whatever the length"
    assert sizes[30][1] == sizes[60][1] < sizes[600][1], "a minute is one row; ten minutes are ten"
    assert sizes[600][1] > 8 * (sizes[60][1] - 70)


def test_text_appears_only_where_it_fits():
    assert _fitting("Good morning, everyone.", 10.0) == "Good morning, everyone."
    cut = _fitting("Good morning, everyone.", 12 * CHARACTER_IN)
    assert cut.endswith("…") and len(cut) <= 11
    assert _fitting("Good morning", 2 * CHARACTER_IN) == ""
    assert _fitting("a\x0eb", 1.0) == "ab", "control characters have no glyph"


def test_a_lane_per_speaker_and_one_without_diarization(tmp_path):
    plain = {"speakers": [], "chunks": [{"text": " Hello there.", "timestamp": [0.5, 2.0]}], "duration": 30.0}
    one = {"chunks": [], "speakers": [{"speaker": "A", "text": "Hello.", "timestamp": [0.5, 2.0]}], "duration": 30.0}
    heights = [png_size(plot_timeline(result, tmp_path / f"{index}.png"))[1] for index, result in enumerate((plain, one, diarized(30.0)))]
    assert heights[0] == heights[1] < heights[2], heights


def test_overlapped_speech_is_where_two_or_more_talk_at_once():
    turns = [Turn("A", 0.0, 5.0), Turn("B", 4.0, 8.0), Turn("C", 4.5, 6.0), Turn("A", 7.5, 9.0), Turn("B", 9.0, 10.0)]
    assert overlapped_spans(turns) == [(4.0, 5.0 + 1.0), (7.5, 8.0)]
    assert overlapped_spans([Turn("A", 0.0, 1.0)]) == []


def test_a_speaker_heard_only_in_overlap_still_gets_a_lane(tmp_path):
    """The timeline can hold a speaker no words were given to (they only talked over someone)."""
    one = {"chunks": [], "speakers": [{"speaker": "A", "text": "Hello.", "timestamp": [0.5, 2.0]}], "duration": 30.0}
    overlapped = {**one, "diarization": [{"speaker": "A", "start": 0.5, "end": 2.0}, {"speaker": "B", "start": 1.0, "end": 1.8}]}
    assert png_size(plot_timeline(one, tmp_path / "one.png"))[1] < png_size(plot_timeline(overlapped, tmp_path / "two.png"))[1]
