"""CAM++ without pyannote: the network loaded from the pipeline's checkpoint for enrolment (random weights)."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
import torch

from speaker_transcripts.models.campplus import save_pyannote_checkpoint
from speaker_transcripts.models.campplus_network import VoiceEmbedder, load_voice_embedder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory):
    import tiny_models

    folder = tmp_path_factory.mktemp("campplus")
    destination = folder / "embedding" / "pytorch_model.bin"
    save_pyannote_checkpoint(tiny_models.build_campplus_weights(folder / "campplus.pt"), destination)
    return destination


def test_the_network_alone_embeds_clips_exactly_as_pyannotes_model_of_the_same_checkpoint(checkpoint):
    from pyannote.audio import Model

    alone, wrapped = load_voice_embedder(checkpoint), Model.from_pretrained(checkpoint).eval()
    assert isinstance(alone, VoiceEmbedder) and not alone.training
    waveforms = torch.randn(3, 1, 24000) * 0.1
    with torch.inference_mode():
        assert torch.equal(alone(waveforms), wrapped(waveforms))


def test_loading_it_imports_no_pyannote(checkpoint):
    """The point of the module: pyannote.audio imports Lightning, half of an enrolment's time."""
    script = ("import sys; from speaker_transcripts.models.campplus_network import load_voice_embedder; "
              f"assert load_voice_embedder({str(checkpoint)!r}) is not None; "
              "print(sorted(name for name in sys.modules if name.split('.')[0] in ('pyannote', 'lightning')))")
    run = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_a_checkpoint_of_another_model_is_not_taken_for_campplus(tiny_pyannote):
    assert load_voice_embedder(tiny_pyannote / "embedding" / "pytorch_model.bin") is None  # WeSpeaker


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    class Payload:
        def __reduce__(self):
            return (print, ("ran",))

    torch.save({"state_dict": {}, "payload": Payload()}, tmp_path / "bad.bin")
    with pytest.raises(pickle.UnpicklingError):
        load_voice_embedder(tmp_path / "bad.bin")
