"""Which chunks diarization embeds, and whose embedding the others borrow."""

from __future__ import annotations

import numpy as np

from speaker_transcripts.models.chunk_embeddings import plan_embeddings, shared_embeddings

FRAMES, STEP = 40, 10  # a chunk is 40 frames, chunks start 10 frames apart (as 10-s windows, 2.5-s steps)


def chunked(voices: np.ndarray, orders: list[list[int]]) -> np.ndarray:
    """Per-chunk activity cut from ``voices`` (global frames, voices); chunk c lists the voices in
    ``orders[c]``'s order, as segmentation numbers its local speakers afresh in every chunk."""
    return np.stack([voices[c * STEP : c * STEP + FRAMES][:, order] for c, order in enumerate(orders)]).astype(float)


def two_voices(chunks: int) -> np.ndarray:
    total = (chunks - 1) * STEP + FRAMES
    voices = np.zeros((total, 3))
    voices[:, 0] = (np.arange(total) // 15) % 2 == 0  # A and B take turns of 15 frames
    voices[:, 1] = 1 - voices[:, 0]
    return voices  # the third local speaker is silent


def test_stride_one_embeds_every_chunk_as_pyannote_does():
    plan = plan_embeddings(chunked(two_voices(5), [[0, 1, 2]] * 5), STEP, stride=1)
    assert plan.embedded.all()
    assert plan.skipped_share == 0.0


def test_skipped_chunks_borrow_the_embedding_of_the_same_voice_whatever_its_local_number():
    orders = [[0, 1, 2], [1, 0, 2], [2, 0, 1], [0, 2, 1], [1, 2, 0]]
    activity = chunked(two_voices(5), orders)
    plan = plan_embeddings(activity, STEP, stride=2)
    assert plan.embedded.tolist() == [True, False, True, False, True]
    for chunk in (1, 3):
        for speaker, voice in enumerate(orders[chunk]):
            source_chunk, source_speaker = plan.source[chunk, speaker]
            if voice == 2:  # silent: keeps its own (free) embedding
                assert (source_chunk, source_speaker) == (chunk, speaker)
            else:
                assert source_chunk in (chunk - 1, chunk + 1)
                assert orders[source_chunk][source_speaker] == voice
    embeddings = np.arange(5 * 3, dtype=float).reshape(5, 3, 1)
    shared = shared_embeddings(embeddings, plan)
    for chunk, speaker in np.ndindex(5, 3):
        assert shared[chunk, speaker, 0] == embeddings[tuple(plan.source[chunk, speaker])][0]
    assert (shared[plan.embedded] == embeddings[plan.embedded]).all()


def test_a_voice_no_embedded_neighbour_has_gets_its_chunk_embedded():
    activity = chunked(two_voices(5), [[0, 1, 2]] * 5)
    activity[1, 12:18, 2] = 1.0  # a third voice heard only in chunk 1 (where its neighbours hear nobody new)
    activity[0, :, 2] = 0.0
    activity[2, :, 2] = 0.0
    plan = plan_embeddings(activity, STEP, stride=2)
    assert plan.embedded.tolist() == [True, True, True, False, True]


def test_two_local_speakers_matching_one_voice_are_not_merged():
    """Segmentation split one voice over two local speakers in chunk 1: borrowing would make them one."""
    activity = chunked(two_voices(3), [[0, 1, 2]] * 3)
    both = activity[1, :, 0].copy()
    activity[1, :, 2] = both * (np.arange(FRAMES) % 2)  # every other frame of voice 0 on speaker 2 as well
    activity[1, :, 0] = both
    plan = plan_embeddings(activity, STEP, stride=2, min_agreement=0.3)
    assert plan.embedded.all()


def test_the_last_chunk_is_always_embedded():
    plan = plan_embeddings(chunked(two_voices(4), [[0, 1, 2]] * 4), STEP, stride=2)
    assert plan.embedded.tolist() == [True, False, True, True]


def test_no_chunks():
    plan = plan_embeddings(np.zeros((0, FRAMES, 3)), STEP, stride=3)
    assert plan.embedded.size == 0 and plan.skipped_share == 0.0
