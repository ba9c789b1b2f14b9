"""``handler.py``, the Inference Endpoints entry, loaded the way the platform loads it.

The platform mounts the repository, installs ``requirements.txt`` (not the package), imports
``handler.py`` from the repository by file path and builds ``EndpointHandler(<repository path>)``.
Here that happens in a fresh interpreter whose installed copy of the package is switched off, in
a copy of the repository that also holds the Whisper checkpoint (as a deployed model repository
does), from a working directory outside it.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

AS_THE_PLATFORM_DOES = r"""
import importlib.util, json, sys
repository, audio = sys.argv[1], sys.argv[2]
# The platform has no installed copy of the package: switch off this venv's editable one.
sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
assert importlib.util.find_spec("speaker_transcripts") is None, "the package must not be importable before handler.py runs"
spec = importlib.util.spec_from_file_location("handler", f"{repository}/handler.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
handler = module.EndpointHandler(repository)
result = handler({"inputs": open(audio).read(), "parameters": {"language": "en"}})
try:
    handler({"inputs": "not base64 audio"})
    refusal = None
except ValueError as error:
    refusal = str(error)
print(json.dumps({"result": result, "refusal": refusal, "package": sys.modules["speaker_transcripts"].__file__}))
"""


def test_endpoints_loads_handler_py_from_the_repository_and_it_serves_a_request(tiny_models, speech_wav, tmp_path):
    repository = tmp_path / "repository"
    shutil.copytree(tiny_models["whisper"], repository)  # a model repository: the checkpoint at its root
    shutil.copy(ROOT / "handler.py", repository)
    shutil.copytree(ROOT / "speaker_transcripts", repository / "speaker_transcripts", ignore=shutil.ignore_patterns("__pycache__"))
    audio = tmp_path / "request.b64"
    audio.write_text(base64.b64encode(speech_wav).decode())
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()

    completed = subprocess.run(
        [sys.executable, "-c", AS_THE_PLATFORM_DOES, str(repository), str(audio)],
        cwd=elsewhere, capture_output=True, text=True, timeout=300, check=False,
    )

    assert completed.returncode == 0, completed.stderr[-3000:]
    answer = json.loads(completed.stdout.splitlines()[-1])
    assert answer["package"].startswith(str(repository)), "the repository's own package was imported"
    result = answer["result"]
    assert set(result) == {"text", "chunks", "speakers", "language", "duration", "decoding", "warnings"}
    assert result["language"] == "en" and result["duration"] > 2.7 and isinstance(result["text"], str)
    assert result["speakers"] == []  # no diarization model configured
    assert answer["refusal"] and "could not decode the audio" in answer["refusal"]
