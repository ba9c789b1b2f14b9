"""The ASR<->speaker merge on hand-built turns, and reading pyannote's outputs."""

from __future__ import annotations

import re
from itertools import pairwise
from types import SimpleNamespace

import pytest
from pyannote.core import Annotation, Segment

from speaker_transcripts.pipeline.diarization import (
    UNKNOWN_SPEAKER,
    Turn,
    assign_speakers,
    diarize,
    group_by_speaker,
    speaker_for,
    turns_from_output,
    word_speakers,
)
from speaker_transcripts.pipeline.transcript import Chunk

A1, B1, A2 = Turn("A", 0.0, 4.0), Turn("B", 4.0, 8.0), Turn("A", 8.0, 12.0)


def words(*spans):
    return [Chunk(f" w{index}", start, end) for index, (start, end) in enumerate(spans)]


def squash(text):
    return re.sub(r"\s+", "", text)


def assert_nothing_lost(chunks, segments):
    assert squash("".join(s.text for s in segments)) == squash("".join(c.text for c in chunks))


def test_chunks_go_to_the_speaker_they_overlap_most():
    chunks = words((0.0, 3.0), (3.5, 6.0), (6.5, 11.0))
    segments = assign_speakers(chunks, [A1, B1, A2])
    assert [(s.speaker, s.text) for s in segments] == [("A", "w0"), ("B", "w1"), ("A", "w2")]


def test_boundary_chunk_goes_to_the_majority_speaker():
    # 1.0 s of A against 3.9 s of B; and 3.0 s of A against 0.5 s of B.
    assert speaker_for(3.0, 7.9, [A1, B1, A2]) == "B"
    assert speaker_for(1.0, 4.5, [A1, B1, A2]) == "A"


def test_word_level_chunks_split_exactly_at_the_speaker_change():
    chunks = words((3.0, 3.5), (3.6, 3.9), (4.1, 4.4), (4.5, 5.0))
    segments = assign_speakers(chunks, [A1, B1])
    assert [(s.speaker, s.text, s.start, s.end) for s in segments] == [("A", "w0 w1", 3.0, 3.9), ("B", "w2 w3", 4.1, 5.0)]


def test_consecutive_chunks_of_one_speaker_are_joined():
    chunks = words((0.0, 1.0), (1.0, 2.0), (2.0, 3.0))
    segments = assign_speakers(chunks, [A1])
    assert len(segments) == 1 and segments[0].text == "w0 w1 w2" and (segments[0].start, segments[0].end) == (0.0, 3.0)


def test_text_in_a_gap_goes_to_the_nearest_speaker():
    turns = [Turn("A", 0.0, 2.0), Turn("B", 6.0, 8.0)]
    assert speaker_for(2.5, 3.0, turns) == "A"
    assert speaker_for(5.0, 5.5, turns) == "B"


def test_text_after_the_last_turn_is_kept_not_dropped():
    chunks = words((0.0, 3.0), (4.0, 7.0), (12.5, 14.0), (14.0, 15.0))
    segments = assign_speakers(chunks, [A1, B1, A2])
    assert segments[-1].speaker == "A" and segments[-1].text == "w2 w3"
    assert_nothing_lost(chunks, segments)


def test_text_before_the_first_turn_is_kept():
    segments = assign_speakers(words((0.0, 0.5), (1.2, 3.0)), [Turn("B", 1.0, 3.0)])
    assert [(s.speaker, s.text) for s in segments] == [("B", "w0 w1")]


def test_a_long_monologue_reads_as_its_sentences():
    sentences = [Chunk(f" Sentence {n}.", n * 4.0, n * 4.0 + 3.8) for n in range(10)]  # 40 s of one speaker
    segments = assign_speakers(sentences, [Turn("A", 0.0, 40.0)])
    assert [s.text for s in segments] == [f"Sentence {n}." for n in range(10)]
    assert {s.speaker for s in segments} == {"A"}


def test_overlapping_turns_are_resolved_deterministically():
    overlapping = [Turn("A", 0.0, 5.0), Turn("B", 3.0, 8.0)]
    assert speaker_for(3.0, 5.0, overlapping) == "A"  # equal overlap: the earlier-starting speaker
    assert speaker_for(3.0, 5.0, list(reversed(overlapping))) == "A"
    assert speaker_for(4.0, 7.0, overlapping) == "B"


def test_equal_overlap_equal_start_breaks_ties_by_label():
    assert speaker_for(0.0, 1.0, [Turn("SPEAKER_01", 0, 2), Turn("SPEAKER_00", 0, 2)]) == "SPEAKER_00"


def test_zero_length_chunk_inside_a_turn():
    assert speaker_for(5.0, 5.0, [A1, B1, A2]) == "B"


def test_no_turns_keeps_text_under_unknown():
    chunks = words((0.0, 1.0), (1.0, 2.0))
    segments = assign_speakers(chunks, [])
    assert [(s.speaker, s.text) for s in segments] == [(UNKNOWN_SPEAKER, "w0 w1")]


def test_no_speech_gives_no_segments():
    assert assign_speakers([], [A1]) == []
    assert assign_speakers([Chunk("  ", 0.0, 1.0)], [A1]) == []


def test_blank_chunks_do_not_split_a_speaker():
    chunks = [Chunk(" one", 0.0, 1.0), Chunk(" ", 5.0, 5.5), Chunk(" two", 1.0, 2.0)]
    assert [(s.speaker, s.text) for s in assign_speakers(chunks, [A1, B1])] == [("A", "one two")]


def test_every_word_kept_once_on_a_busy_conversation():
    turns = [Turn("A" if i % 2 else "B", i * 0.7, i * 0.7 + 1.0) for i in range(40)]  # overlapping turns
    chunks = words(*[(i * 0.3, i * 0.3 + 0.25) for i in range(100)])
    segments = assign_speakers(chunks, turns)
    assert_nothing_lost(chunks, segments)
    assert all(s.start <= s.end for s in segments)
    assert all(a.speaker != b.speaker for a, b in pairwise(segments))


def _annotation():
    annotation = Annotation()
    annotation[Segment(4.0, 8.0)] = "SPEAKER_01"
    annotation[Segment(0.0, 4.5)] = "SPEAKER_00"
    return annotation


def test_turns_from_annotation_sorted_by_time():
    assert turns_from_output(_annotation()) == [Turn("SPEAKER_00", 0.0, 4.5), Turn("SPEAKER_01", 4.0, 8.0)]


def test_turns_from_diarize_output_prefer_exclusive():
    exclusive = Annotation()
    exclusive[Segment(0.0, 4.0)] = "SPEAKER_00"
    output = SimpleNamespace(speaker_diarization=_annotation(), exclusive_speaker_diarization=exclusive)
    assert turns_from_output(output) == [Turn("SPEAKER_00", 0.0, 4.0)]
    assert turns_from_output(SimpleNamespace(speaker_diarization=_annotation()))[1].speaker == "SPEAKER_01"


def test_turns_from_diarize_output_can_keep_overlap_for_scoring():
    exclusive = Annotation()
    exclusive[Segment(0.0, 4.0)] = "SPEAKER_00"
    output = SimpleNamespace(speaker_diarization=_annotation(), exclusive_speaker_diarization=exclusive)
    assert turns_from_output(output, exclusive=False) == [Turn("SPEAKER_00", 0.0, 4.5), Turn("SPEAKER_01", 4.0, 8.0)]


def test_diarize_drops_slivers_too_short_for_a_word():
    """The sample conversation's case: 0.13 s of the previous speaker at the start of a turn."""
    import numpy as np

    def pipeline(audio, **hints):
        annotation = Annotation()
        annotation[Segment(4.0, 10.6)] = "B"
        annotation[Segment(12.33, 12.47)] = "B"
        annotation[Segment(12.47, 14.0)] = "A"
        annotation[Segment(0.5, 0.75)] = "A"  # a quarter second: a short word, kept
        return annotation

    turns = diarize(pipeline, np.zeros(16000, dtype=np.float32), 16000, {}).turns
    assert turns == [Turn("A", 0.5, 0.75), Turn("B", 4.0, 10.6), Turn("A", 12.47, 14.0)]


def test_diarize_numbers_pyannote_speakers_in_order_of_appearance():
    import numpy as np

    def pipeline(labels):
        def run(audio, **hints):
            annotation = Annotation()
            for index, label in enumerate(labels):
                annotation[Segment(index, index + 0.9)] = label
            return annotation

        return run

    silence = np.zeros(16000, dtype=np.float32)
    renumbered = diarize(pipeline(["SPEAKER_01", "SPEAKER_02", "SPEAKER_00", "SPEAKER_01"]), silence, 16000, {}).turns
    assert [turn.speaker for turn in renumbered] == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_02", "SPEAKER_00"]
    named = diarize(pipeline(["BOB", "ALICE"]), silence, 16000, {}).turns
    assert [turn.speaker for turn in named] == ["BOB", "ALICE"]


def test_unexpected_pipeline_output_is_named():
    with pytest.raises(TypeError, match="expected a pyannote Annotation"):
        turns_from_output([("A", 0, 1)])


def said(*spec):
    """Words with text and times: said((" Hello", 0, 0.4), ...)."""
    return [Chunk(text, start, end) for text, start, end in spec]


# Two turns overlapping from 11.0 to 11.9: A's ends, B's starts (as in the dev overlap conversation).
A_TALKS, B_INTERRUPTS = Turn("A", 7.0, 11.9), Turn("B", 11.0, 12.5)


def test_words_inside_an_overlap_change_speaker_at_the_sentence_end():
    spoken = said((" it", 10.5, 10.8), (" loads.", 10.8, 11.1), (" Oh,", 11.12, 11.3), (" that", 11.3, 11.5),
                  (" is", 11.5, 11.6), (" good", 11.8, 12.0), (" news.", 12.0, 12.4))
    assert word_speakers(spoken, [A_TALKS, B_INTERRUPTS]) == ["A", "A", "B", "B", "B", "B", "B"]
    # word by word, max overlap cannot tell: " Oh," " that" " is" lie wholly in both turns
    assert [speaker_for(w.start, w.end, [A_TALKS, B_INTERRUPTS]) for w in spoken][2:5] == ["A", "A", "A"]


def test_clear_time_evidence_beats_the_sentence_prior():
    # no punctuation, no pause, but the turns do not overlap: the change follows the times
    spoken = said((" one", 3.0, 3.5), (" two", 3.5, 3.9), (" three", 4.1, 4.6), (" four", 4.6, 5.0))
    assert word_speakers(spoken, [A1, B1]) == ["A", "A", "B", "B"]
    # a one-word interjection between two turns of another speaker keeps its own speaker
    yes = said((" so", 1.0, 1.5), (" yes", 2.05, 2.35), (" then", 2.5, 3.0))
    assert word_speakers(yes, [Turn("A", 0.0, 2.0), Turn("B", 2.0, 2.4), Turn("A", 2.4, 4.0)]) == ["A", "B", "A"]


def test_word_speakers_gaps_one_speaker_and_nothing():
    gap_word = said((" early", 0.0, 0.2), (" late", 20.0, 20.5))
    assert word_speakers(gap_word, [Turn("A", 1.0, 2.0), Turn("B", 15.0, 18.0)]) == ["A", "B"]
    assert word_speakers(said((" solo", 0.0, 0.5), (" talk.", 0.5, 1.0)), [Turn("S", 0.0, 1.0)]) == ["S", "S"]
    assert word_speakers(said((" who", 0.0, 0.5)), []) == [UNKNOWN_SPEAKER]
    assert word_speakers([], [A1]) == []


def test_group_by_speaker_keeps_every_word_once():
    spoken = said((" a", 0, 1), (" ", 1, 1), (" b", 1, 2), (" c", 2, 3))
    segments = group_by_speaker(spoken, ["X", "Y", "X", "Y"])
    assert [(s.speaker, s.text) for s in segments] == [("X", "a b"), ("Y", "c")]
    assert_nothing_lost(spoken, segments)


def test_segments_spoken_over_someone_name_who_else_was_talking():
    from speaker_transcripts.pipeline.diarization import SpeakerSegment, with_overlaps

    timeline = [Turn("A", 0.0, 5.0), Turn("B", 4.0, 8.0), Turn("C", 7.9, 9.0)]
    segments = [SpeakerSegment("A", " Well, I think", 0.0, 5.0), SpeakerSegment("B", " Right.", 5.0, 8.0)]
    marked = with_overlaps(segments, timeline)
    assert [segment.overlapping for segment in marked] == [("B",), ()], "0.1 s with C is a turn edge, not overlap"
    assert marked[0].to_dict() == {"speaker": "A", "text": " Well, I think", "timestamp": [0.0, 5.0], "overlapping": ["B"]}
    assert "overlapping" not in marked[1].to_dict()


def test_the_timeline_keeps_overlaps_and_labels_agree_with_the_turns():
    from types import SimpleNamespace

    import numpy as np

    overlapping, exclusive = Annotation(), Annotation()
    overlapping[Segment(0.0, 4.0)] = "SPEAKER_01"
    overlapping[Segment(3.0, 6.0)] = "SPEAKER_00"
    exclusive[Segment(0.0, 3.5)] = "SPEAKER_01"
    exclusive[Segment(3.5, 6.0)] = "SPEAKER_00"
    vectors = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)  # rows follow labels(): SPEAKER_00, SPEAKER_01
    output = SimpleNamespace(speaker_diarization=overlapping, exclusive_speaker_diarization=exclusive, speaker_embeddings=vectors)
    found = diarize(lambda audio, **hints: output, np.zeros(16000, dtype=np.float32), 16000, {})
    assert found.turns == [Turn("SPEAKER_00", 0.0, 3.5), Turn("SPEAKER_01", 3.5, 6.0)]
    assert found.timeline == [Turn("SPEAKER_00", 0.0, 4.0), Turn("SPEAKER_01", 3.0, 6.0)]
    assert found.embeddings["SPEAKER_00"].tolist() == [1.0, 0.0], "the voice follows its renamed speaker"
    assert found.renamed({"SPEAKER_01": "Ann"}).speakers == ["SPEAKER_00", "Ann"]


def test_speaker_segments_never_overlap_each_other():
    from speaker_transcripts.pipeline.diarization import group_by_speaker
    from speaker_transcripts.pipeline.transcript import Chunk

    words = [Chunk(" It", 53.0, 53.2), Chunk(" works.", 53.2, 56.81), Chunk(" Great.", 56.79, 57.5)]
    segments = group_by_speaker(words, ["A", "A", "B"])
    assert [(segment.start, segment.end) for segment in segments] == [(53.0, 56.81), (56.81, 57.5)]


def test_a_sentences_last_word_stays_with_its_speaker_when_the_turn_boundary_falls_early():
    """Diarization ends A's turn 0.1 s into "take?"; the last word of the sentence stays A's, and B's
    reply, after the question mark, is B's. A word well inside the other turn still changes speaker."""
    from speaker_transcripts.pipeline.diarization import Turn, word_speakers
    from speaker_transcripts.pipeline.transcript import Chunk

    spoken = [(" How", 0.0, 0.2), (" long", 0.2, 0.5), (" do", 0.5, 0.6), (" you", 0.6, 0.7), (" think", 0.7, 1.0),
              (" that", 1.0, 1.2), (" will", 1.2, 1.4), (" take?", 1.4, 1.8), (" A", 1.9, 2.0), (" week.", 2.0, 2.4)]
    words = [Chunk(text, start, end) for text, start, end in spoken]
    early = [Turn("A", 0.0, 1.5), Turn("B", 1.5, 2.4)]
    assert word_speakers(words, early) == ["A"] * 8 + ["B"] * 2
    interrupted = [Turn("A", 0.0, 0.6), Turn("B", 0.6, 2.4)]  # B takes over from "you" on: the evidence is clear
    assert word_speakers(words, interrupted)[4:] == ["B"] * 6


def test_enrolment_loads_the_embedded_pipelines_campplus_alone_and_embeds_as_the_pipeline(tiny_pyannote, tmp_path):
    """``load_speaker_embedder``: the network from the pipeline folder without pyannote's pipeline, the same
    embeddings as the loaded pipeline's; another pipeline's model (WeSpeaker here) through the whole pipeline."""
    import numpy as np
    import tiny_models

    from speaker_transcripts.config import ModelSettings
    from speaker_transcripts.models.campplus_network import VoiceEmbedder
    from speaker_transcripts.models.pyannote_pipeline import write_pipeline_folder
    from speaker_transcripts.pipeline import diarization
    from speaker_transcripts.pipeline.diarization import load_diarization_pipeline, load_speaker_embedder, speaker_embedder

    folder = tmp_path / "pipeline"
    write_pipeline_folder(tiny_pyannote / "segmentation" / "pytorch_model.bin",
                          tiny_models.build_campplus_weights(tmp_path / "campplus.pt"), folder)
    clips = np.random.default_rng(0).standard_normal((2, 16000)).astype(np.float32) * 0.1
    for settings in (ModelSettings(diarization_model=str(folder)), ModelSettings(diarization_model=str(tiny_pyannote))):
        whole = speaker_embedder(load_diarization_pipeline(settings, "cpu"))
        np.testing.assert_array_equal(load_speaker_embedder(settings, "cpu")(clips), whole(clips))
        np.testing.assert_array_equal(load_speaker_embedder(settings, "cpu")(clips[0]), whole(clips[0]))
    loaded = []
    original = VoiceEmbedder.load_state_dict
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(VoiceEmbedder, "load_state_dict", lambda self, *a, **k: loaded.append(1) or original(self, *a, **k))
        patch.setattr(diarization, "load_diarization_pipeline", lambda *a: pytest.fail("the pipeline was loaded"))
        load_speaker_embedder(ModelSettings(diarization_model=str(folder)), "cpu")
    assert loaded == [1]


def test_a_seam_without_pyannotes_models_is_given_float32_samples():
    """A request holds 16-bit samples (``samples.py``); a seam that cannot be given float32 batch by
    batch gets float32 of the whole."""
    import numpy as np

    seen = []

    def pipeline(audio, **hints):
        seen.append(audio["waveform"].dtype)
        return Annotation()

    diarize(pipeline, np.zeros(16000, dtype=np.int16), 16000, {})
    assert [str(dtype) for dtype in seen] == ["torch.float32"]


def test_pyannotes_models_take_16_bit_samples_as_float32_batch_by_batch():
    """The waveform pyannote slides over stays the request's 16-bit array (a float32 copy of a
    3-hour file is 691 MB); its segmentation and embedding models see float32 batches at full
    scale 1.0, and only while the request is diarized."""
    import numpy as np
    import torch

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[torch.dtype, float]] = []

        def forward(self, waveforms: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
            self.seen.append((waveforms.dtype, float(waveforms.abs().max())))
            return waveforms.sum()

    segmentation, embedding = Model(), Model()
    samples = (np.linspace(-0.5, 0.5, 16000) * 32768).astype(np.int16)
    held = []

    def run(audio, **hints):
        held.append(audio["waveform"])
        segmentation(audio["waveform"][:, :8000][None])
        embedding(audio["waveform"][None], weights=torch.ones(1, 10))
        return Annotation()

    class Seam:  # where pyannote's SpeakerDiarization keeps its two models
        _segmentation = SimpleNamespace(model=segmentation)
        _embedding = SimpleNamespace(model_=embedding)

        def __call__(self, audio, **hints):
            return run(audio)

    diarize(Seam(), samples, 16000, {})
    assert held[-1].dtype == torch.int16 and np.shares_memory(held[-1].numpy(), samples)
    assert segmentation.seen[-1] == embedding.seen[-1] == (torch.float32, 0.5)
    segmentation(torch.zeros(1, 1, 10, dtype=torch.int16))
    assert segmentation.seen[-1][0] == torch.int16, "the models are left as they were found"
