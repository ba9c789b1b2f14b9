"""The model cache: a damaged cache is refused with the index unreachable and pulled again with it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import numpy as np

from probes.server import KEY, ROOT, Server
from tests.audio_files import pcm_wav


def damaged_cache(asr_model: str, port: int, speech: np.ndarray) -> list[tuple[str, str]]:
    """A copy of the model cache with one bit flipped in the weights: the server must refuse to
    start when the index is unreachable, and pull again and answer correctly when it is."""
    import shutil

    from speaker_transcripts.models.registry import REGISTRY, cache_dir, pull

    pull(REGISTRY[asr_model])
    outcomes = []
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(scratch) / "models"
        shutil.copytree(cache_dir() / asr_model, cache / asr_model)
        weights = next((cache / asr_model).glob("*.safetensors"))
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0x10
        weights.write_bytes(bytes(data))
        environment = {**os.environ, "ASR_MODEL": asr_model, "DIARIZATION_MODEL": "none", "EMBEDDED_MODELS_DIR": str(cache),
                       "PIP_NO_INDEX": "1"}
        refused = subprocess.run([sys.executable, "-m", "speaker_transcripts", "serve", "--port", str(port)], check=False, cwd=ROOT,
                                 env=environment, capture_output=True, text=True, timeout=300)
        lines = [line for line in refused.stderr.splitlines() if "damaged" in line]
        outcomes.append(("index unreachable", f"exit {refused.returncode}; {lines[0][:120] if lines else 'no damage message'}"))
        server = Server(asr_model, port, EMBEDDED_MODELS_DIR=str(cache))
        try:
            answer = httpx.post(server.url + "/", content=pcm_wav(speech[:44800]), params={"language": "en"},
                                headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {KEY}"}, timeout=120)
            text = answer.json().get("text", "") if answer.status_code == 200 else ""
        finally:
            server.close()
        outcomes.append(("index reachable", f"{answer.status_code}: {text.strip()[:60]!r}"))
    return outcomes
