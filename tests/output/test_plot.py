"""The speaker timeline: rows of at most a minute, a lane per speaker, text only where it fits."""

from __future__ import annotations

import struct

import matplotlib.pyplot as plt

from speaker_transcripts.output.plot import _fitting, overlapped_spans, plot_timeline, row_spans, timeline_figure
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


def characters(text: str) -> float:
    return 10.0 * len(text)


def test_text_appears_only_where_it_fits_in_whole_words():
    assert _fitting("Good morning, everyone.", 1000, characters) == ["Good morning, everyone."]
    assert _fitting("Good morning, everyone.", 150, characters, lines=1) == ["Good morning…"], "whole words, no dangling comma"
    assert _fitting("Good morning, everyone.", 40, characters) == [], "not even the first word fits"
    assert _fitting("I think we should ship it.", 60, characters) == [], "one word and an ellipsis say nothing: no label"
    assert _fitting("a\x0eb", 100, characters) == ["ab"], "control characters have no glyph"


def test_text_wraps_onto_a_second_line_before_it_is_cut():
    sentence = "Good morning, everyone. Shall we start?"
    assert _fitting(sentence, 150, characters) == ["Good morning,", "everyone…"]
    assert _fitting(sentence, 200, characters) == ["Good morning,", "everyone. Shall we…"]
    assert _fitting(sentence, 240, characters) == ["Good morning, everyone.", "Shall we start?"]
    assert _fitting(sentence, 1000, characters, lines=1) == [sentence]


def test_labels_use_the_lane_up_to_its_next_bar_and_never_cross_it(tmp_path):
    """Measured as drawn: short bars of long sentences, two speakers taking turns, in every row, up to
    the row's last bar (which once lost its last word to the axes' edge). A label may run on past its
    bar while the lane is empty (the other person is speaking), never into its lane's next bar, never
    out of its lane."""
    sentences = ["Welcome back everyone, let us pick up where we left off yesterday.", "Right.",
                 "Mmhmm, I see, although the numbers from the second quarter tell another story entirely."]
    segments = [{"speaker": f"SPEAKER_0{n % 2}", "text": sentences[n % 3], "timestamp": [n * 3.0, n * 3.0 + 2.9]}
                for n in range(40)]
    figure = timeline_figure({"speakers": segments, "chunks": [], "duration": 120.0})
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        labelled, words_shown = 0, []
        for axes in figure.axes:
            frame = axes.get_window_extent(renderer)
            bars = sorted((pixels[:, 1].min(), pixels[:, 0].min(), pixels[:, 0].max())
                          for pixels in (axes.transData.transform(path.vertices) for collection in axes.collections
                                         if collection.get_alpha() == 0.55 for path in collection.get_paths()))
            labels = [text for text in axes.texts if text.get_text().strip()]
            boxes = [text.get_window_extent(renderer) for text in labels]
            for label, box in zip(labels, boxes, strict=True):
                assert box.x1 <= frame.x1, "cut at the row's end"
                (bottom, left, _), *_ = [bar for bar in bars if abs(bar[1] - box.x0) < 2 and bar[0] <= box.y0 <= bar[0] + 40]
                lane = [bar for bar in bars if abs(bar[0] - bottom) < 1]
                later = [bar_left for _, bar_left, _ in lane if bar_left > left + 1]
                assert box.x1 <= min(later, default=frame.x1) + 1, f"runs into its lane's next bar: {label.get_text()}"
                text = label.get_text().replace("\n", " ")
                words = text.strip().removesuffix("…").split()
                assert not text.endswith("…") or len(words) >= 2
                cut = text.endswith("…")
                assert any(words == [word.rstrip(",;:.") if cut and n == len(words) - 1 else word
                                     for n, word in enumerate(sentence.split()[: len(words)])]
                           for sentence in sentences), f"whole words from a sentence's start: {words}"
                words_shown.append(len(words))
            for index, box in enumerate(boxes):
                assert not any(box.overlaps(other) for other in boxes[index + 1:])
            labelled += len(labels)
        assert labelled >= 30, "most bars carry words"
        assert sorted(words_shown)[len(words_shown) // 2] >= 5, f"a label says something, not 'That is…': {words_shown}"
    finally:
        plt.close(figure)


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


def test_a_short_remainder_joins_the_last_row_and_the_title_stays_above_the_rows():
    assert row_spans(420.5) == [(row * 60.0, 420.5 if row == 6 else (row + 1) * 60.0) for row in range(7)]
    assert len(row_spans(440.0)) == 8 and row_spans(30.0) == [(0.0, 30.0)]
    figure = timeline_figure(diarized(420.5), title="a seven-minute meeting")
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        title = figure._suptitle.get_window_extent(renderer)
        assert len(figure.axes) == 7
        assert all(title.y0 >= axes.get_tightbbox(renderer).y1 - 1 for axes in figure.axes), "the title is drawn over a row"
    finally:
        plt.close(figure)


def test_a_speakers_consecutive_sentences_are_one_bar_with_one_label():
    segments = [{"speaker": "SPEAKER_00", "text": text, "timestamp": [start, start + 1.8]}
                for start, text in ((0.0, "I agree."), (2.0, "We should ship."), (4.0, "Today."))]
    figure = timeline_figure({"speakers": segments, "chunks": [], "duration": 10.0})
    try:
        labels = [text.get_text().strip() for axes in figure.axes for text in axes.texts if text.get_text().strip()]
        assert labels == ["I agree. We should ship. Today."]
    finally:
        plt.close(figure)


def test_no_empty_band_between_the_title_and_the_first_row():
    """The title sat 50-60 px above the first row's own title and ticks, an empty band on a one-row plot."""
    segments = [{"speaker": "SPEAKER_00", "text": "Go forward ten meters.", "timestamp": [0.3, 4.0]},
                {"speaker": "SPEAKER_01", "text": "And Mr. John Dashwood had then leisure.", "timestamp": [4.1, 12.4]}]
    for duration in (14.7, 200.0):
        figure = timeline_figure({"speakers": segments, "chunks": [], "duration": duration}, "two-readers.wav")
        try:
            figure.canvas.draw()
            renderer = figure.canvas.get_renderer()
            gap = figure._suptitle.get_window_extent(renderer).y0 - figure.axes[0].get_tightbbox(renderer).y1
            assert 0 <= gap <= 30, gap
        finally:
            plt.close(figure)
