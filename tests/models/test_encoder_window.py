"""The encoder over a window sized to the audio (models/encoder_window.py) on a tiny random Whisper."""

from __future__ import annotations

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

from speaker_transcripts.models.encoder_window import MARGIN_S, SHORTEST_S, WINDOW_STEP_FRAMES, encoder_window, window_frames


def tiny_whisper() -> WhisperForConditionalGeneration:
    config = WhisperConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                           encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=80, max_source_positions=1500)
    return WhisperForConditionalGeneration(config).eval()


def test_the_window_holds_the_audio_and_a_margin_and_never_exceeds_30_s():
    assert window_frames(1.0, 3000) == round(SHORTEST_S * 100)  # short audio: the shortest window Whisper does not loop in
    assert window_frames(10.0, 3000) == round((10.0 + MARGIN_S) * 100)
    assert window_frames(10.005, 3000) == 1300  # rounded up to whole seconds: the audio and the margin always fit
    assert window_frames(29.5, 3000) == 3000
    assert window_frames(1.0, 3000, 12.0) == 1200 and window_frames(1.0, 3000, 1.0) == round(SHORTEST_S * 100)  # a longer shortest window; never under SHORTEST_S
    assert window_frames(1.0, 2000) == 600 and window_frames(25.0, 2000) == 2000  # never more than the model's full window


def test_windows_come_in_a_few_sizes_so_per_shape_caches_stay_bounded():
    """torch keeps state per input shape and glibc the heap that differently sized buffers freed: a live
    session decoding every buffer length in 20-ms steps grew for 30 minutes (issue 50). Every length from 0 to 30 s in 10-ms steps
    needs at most the 25 whole-second windows from 6 to 30 s, each even (the second convolution halves it)."""
    sizes = {window_frames(centis / 100, 3000) for centis in range(3001)}
    assert sizes == set(range(600, 3001, WINDOW_STEP_FRAMES)) and all(size % 2 == 0 for size in sizes)
    assert all(window_frames(centis / 100, 3000) >= (centis / 100 + MARGIN_S) * 100 or window_frames(centis / 100, 3000) == 3000
               for centis in range(3001))


def test_inside_the_window_the_encoder_reads_fewer_frames_and_everything_is_restored_after():
    model = tiny_whisper()
    embedding = model.get_encoder().embed_positions
    features = torch.randn(1, 80, 3000)
    with torch.inference_mode():
        full = model.get_encoder()(features).last_hidden_state
        with encoder_window(model, 800):
            short = model.get_encoder()(features[..., :800]).last_hidden_state
            assert model.config.max_source_positions == 400
        again = model.get_encoder()(features).last_hidden_state
    assert short.shape[1] == 400 and full.shape[1] == 1500
    assert model.config.max_source_positions == 1500 and model.get_encoder().embed_positions is embedding
    assert torch.equal(full, again)
    with encoder_window(model, 3000):  # the full window: nothing changes
        assert model.get_encoder().embed_positions is embedding
