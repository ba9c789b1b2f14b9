"""The README's command lines, read from README.md itself so they cannot drift from the code.

Every ``python`` invocation of one of this repo's scripts, in a shell block or inline, runs the
venv's interpreter (outside the venv the imports fail), and each script's arguments parse with
that script's own parser. Commands that need a deployed endpoint or a token are not run; their
arguments are what can drift. The main command is run for real in ``test_embedded_real.py``; the
README's three Python examples (requests, InferenceClient, openai) run as written against a real
server on 127.0.0.1.
"""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SCRIPT_CALL = re.compile(r"(?P<python>\S*python3?) (?P<script>(?:bench/)?[a-z_]+\.py)\b(?P<rest>[^`\n]*)")
PARSED_SCRIPTS = {"cli.py": "cli", "client.py": "client", "deploy.py": "deploy", "evaluate.py": "evaluate",
                  "server.py": "server", "bench/long_form.py": "bench.long_form", "bench/cpu_speed.py": "bench.cpu_speed"}


def shell_lines() -> list[str]:
    """Commands in ```bash blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        lines += [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]
    return lines


def script_calls() -> list[tuple[str, str, list[str]]]:
    """(interpreter, script, arguments) of every script call in the README, blocks and prose."""
    calls = []
    for line in shell_lines():
        for command in line.split("&&"):
            match = SCRIPT_CALL.search(command)
            if match:
                calls.append((match["python"], match["script"], shlex.split(match["rest"])))
    for inline in re.findall(r"`([^`\n]*python3? [^`\n]*\.py[^`\n]*)`", README):
        match = SCRIPT_CALL.search(inline)
        if match:
            calls.append((match["python"], match["script"], shlex.split(match["rest"])))
    return calls


def test_the_readme_has_the_commands_this_test_reads():
    scripts = {script for _, script, _ in script_calls()}
    assert {"cli.py", "client.py", "deploy.py", "evaluate.py", "models.py", "server.py"} <= scripts, scripts


@pytest.mark.parametrize(("python", "script", "arguments"), script_calls(), ids=lambda value: str(value)[:40])
def test_each_command_uses_the_venv_and_parses(python, script, arguments, monkeypatch):
    assert python == ".venv/bin/python", f"{script}: outside the venv the imports fail; the README must say .venv/bin/python"
    assert (ROOT / script).is_file()
    if script not in PARSED_SCRIPTS:
        return
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module(PARSED_SCRIPTS[script])
    placeholders = [argument.replace("$", "") for argument in arguments]  # $ENDPOINT_URL and friends stay text
    try:
        module.parse_arguments(placeholders)
    except SystemExit as error:
        pytest.fail(f"README command does not parse: {script} {' '.join(arguments)} (exit {error.code})")


def test_client_parameters_may_follow_the_options():
    import client

    parsed = client.parse_arguments(["a.wav", "--url", "http://x", "--format", "srt", "num_speakers=2", "language=en"])
    assert parsed.parameters == ["num_speakers=2", "language=en"] and parsed.format == "srt"


def python_block(containing: str) -> str:
    blocks = [block for block in re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL) if containing in block]
    assert len(blocks) == 1, f"one README python block with {containing!r}"
    return blocks[0]


@pytest.fixture(scope="module")
def undiarized_server_url(tiny_models):
    from servers import serving

    import server
    from config import ModelSettings, ServerSettings
    from handler import EndpointHandler

    handler = EndpointHandler(settings=ModelSettings(asr_model=str(tiny_models["whisper"]), warmup=False))
    with serving(server.create_app(lambda: handler, ServerSettings())) as base_url:
        yield base_url


@pytest.mark.parametrize("diarized", [True, False])
def test_the_openai_example_runs_as_written(diarized, request, speech_wav, tmp_path, monkeypatch, capsys):
    """With and without a diarization model (without, segments carry no speaker)."""
    base_url = request.getfixturevalue("server_url" if diarized else "undiarized_server_url")
    (tmp_path / "meeting.wav").write_bytes(speech_wav)
    monkeypatch.chdir(tmp_path)
    code = python_block("audio.transcriptions.create").replace("http://localhost:8000", base_url)
    exec(compile(code, "README.md", "exec"), {"API_KEY": None})  # noqa: S102 (running the README example is the test)
    printed = capsys.readouterr().out.splitlines()
    assert printed, "the example prints a line per segment"
    assert printed[0].startswith(("ALICE ", "BOB ") if diarized else "- "), printed[0]


@pytest.mark.parametrize("marker", ["requests.post(", "InferenceClient(token=HF_TOKEN)"])
def test_the_endpoint_examples_run_as_written(marker, server_url, speech_wav, tmp_path, monkeypatch, capsys):
    """The `requests` and `InferenceClient` examples, against this repo's server standing in for the endpoint."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the suite's offline switch covers local URLs too
    (tmp_path / "meeting.wav").write_bytes(speech_wav)
    monkeypatch.chdir(tmp_path)
    code = python_block(marker)
    exec(compile(code, "README.md", "exec"), {"ENDPOINT_URL": server_url, "HF_TOKEN": "hf_unused"})  # noqa: S102 (the README example is the test)
    printed = capsys.readouterr().out
    assert "ALICE" in printed or "BOB" in printed, printed
