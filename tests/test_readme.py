"""The README's command lines (and its docs/ pages'), read from the files so they cannot drift from the code.

Every ``speaker-transcripts`` command in a shell block runs the venv's console command (the one
the README's install command puts there), every subcommand exists, and each command's arguments
parse with that subcommand's own parser; the benchmark scripts' calls likewise, with the venv's
interpreter. Commands that need a deployed endpoint or a token are not run; their arguments are
what can drift. The main command is run for real in ``end_to_end/test_embedded_real.py``; the
README's three Python examples (requests, InferenceClient, openai) run as written against a real
server on 127.0.0.1.
"""

from __future__ import annotations

import importlib
import re
import shlex

import pytest
from documentation import PAGES, ROOT, documented_text

from speaker_transcripts.cli import SUBCOMMANDS

# The README first (its first command is the main one), then the docs/ pages it links to.
README = documented_text()
COMMAND = re.compile(r"(?P<program>\S*speaker-transcripts) (?P<subcommand>[a-z-]+)(?P<rest>[^`\n]*)")
BENCH_CALL = re.compile(r"(?P<python>\S*python3?) (?P<script>bench/[a-z_/]+\.py)\b(?P<rest>[^`\n]*)")
PARSED_BENCHES = {"bench/speed/long_form.py": "bench.speed.long_form", "bench/speed/cpu_speed.py": "bench.speed.cpu_speed"}


def shell_lines() -> list[str]:
    """Commands in ```bash blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        lines += [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]
    return lines


def inline_code() -> list[str]:
    return re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", README, flags=re.DOTALL))


def commands(pattern: re.Pattern[str], texts: list[str]) -> list[re.Match[str]]:
    return [match for text in texts for part in text.split("&&") if (match := pattern.search(part))]


def test_the_readme_has_the_commands_this_test_reads():
    subcommands = {match["subcommand"] for match in commands(COMMAND, shell_lines())}
    assert set(SUBCOMMANDS) <= subcommands, subcommands
    assert {match["script"] for match in commands(BENCH_CALL, shell_lines() + inline_code())} >= set(PARSED_BENCHES)


def test_the_main_command_installs_the_package_and_runs_its_console_command():
    main = shell_lines()[0]
    assert ".venv/bin/pip install ." in main and ".venv/bin/speaker-transcripts transcribe samples/two-readers.wav" in main, main


@pytest.mark.parametrize(
    ("program", "subcommand", "arguments"),
    [(m["program"], m["subcommand"], shlex.split(m["rest"])) for m in commands(COMMAND, shell_lines())],
    ids=lambda value: str(value)[:40],
)
def test_each_shell_command_uses_the_venv_and_parses(program, subcommand, arguments):
    assert program == ".venv/bin/speaker-transcripts", f"{subcommand}: the README's install puts the command in .venv/bin"
    parses_with_its_subcommand(subcommand, arguments)


@pytest.mark.parametrize(
    ("subcommand", "arguments"),
    [(m["subcommand"], shlex.split(m["rest"])) for m in commands(COMMAND, inline_code())],
    ids=lambda value: str(value)[:40],
)
def test_each_command_in_the_prose_names_a_subcommand_and_its_options(subcommand, arguments, capsys):
    """Prose quotes commands in part (``speaker-transcripts evaluate --long-form chunked``): the
    subcommand must exist and every option it names must be one of that subcommand's."""
    assert subcommand in SUBCOMMANDS, f"the README names a subcommand that does not exist: {subcommand}"
    module = importlib.import_module(f"speaker_transcripts.cli.{SUBCOMMANDS[subcommand][0]}")
    with pytest.raises(SystemExit):
        module.parse_arguments(["--help"])
    usage = capsys.readouterr().out
    options = [argument.split("=")[0] for argument in arguments if argument.startswith("--")]
    assert all(re.search(rf"{re.escape(option)}\b", usage) for option in options), (subcommand, options)


def parses_with_its_subcommand(subcommand: str, arguments: list[str]) -> None:
    assert subcommand in SUBCOMMANDS, f"the README names a subcommand that does not exist: {subcommand}"
    module = importlib.import_module(f"speaker_transcripts.cli.{SUBCOMMANDS[subcommand][0]}")
    placeholders = [argument.replace("$", "") for argument in arguments]  # $ENDPOINT_URL and friends stay text
    try:
        module.parse_arguments(placeholders)
    except SystemExit as error:
        pytest.fail(f"README command does not parse: speaker-transcripts {subcommand} {' '.join(arguments)} (exit {error.code})")


@pytest.mark.parametrize(
    ("python", "script", "arguments"),
    [(m["python"], m["script"], shlex.split(m["rest"])) for m in commands(BENCH_CALL, shell_lines() + inline_code())],
    ids=lambda value: str(value)[:40],
)
def test_each_benchmark_call_uses_the_venv_and_parses(python, script, arguments, monkeypatch):
    assert python == ".venv/bin/python", f"{script}: outside the venv the imports fail; the README must say .venv/bin/python"
    assert (ROOT / script).is_file()
    if script not in PARSED_BENCHES:
        return
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module(PARSED_BENCHES[script])
    try:
        module.parse_arguments([argument.replace("$", "") for argument in arguments])
    except SystemExit as error:
        pytest.fail(f"README command does not parse: {script} {' '.join(arguments)} (exit {error.code})")


def test_client_parameters_may_follow_the_options():
    from speaker_transcripts.cli import client

    parsed = client.parse_arguments(["a.wav", "--url", "http://x", "--format", "srt", "num_speakers=2", "language=en"])
    assert parsed.parameters == ["num_speakers=2", "language=en"] and parsed.format == "srt"


def python_block(containing: str) -> str:
    blocks = [block for block in re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL) if containing in block]
    assert len(blocks) == 1, f"one README python block with {containing!r}"
    return blocks[0]


@pytest.fixture(scope="module")
def undiarized_server_url(tiny_models):
    from servers import serving

    from speaker_transcripts.config import ModelSettings, ServerSettings
    from speaker_transcripts.pipeline.transcriber import Transcriber
    from speaker_transcripts.server.app import create_app

    handler = Transcriber(settings=ModelSettings(asr_model=str(tiny_models["whisper"]), warmup=False))
    with serving(create_app(lambda: handler, ServerSettings())) as base_url:
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


def test_every_relative_link_in_the_readme_and_docs_leads_somewhere():
    """The README links its docs/ pages (and they it): a moved section must not leave a dead link."""
    for page in [*PAGES, ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md"]:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name}: {target} does not exist"
            if anchor and linked.suffix == ".md":
                body = linked.read_text()
                headings = {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-").strip("-")
                            for line in body.splitlines() if line.startswith("#")}
                assert anchor in headings or f'id="{anchor}"' in body, f"{page.name}: no anchor #{anchor} in {linked.name}"


def curl_lines() -> list[str]:
    return [line for line in shell_lines() if "curl " in line]


def test_every_curl_example_runs_as_written_on_a_file_of_several_megabytes(undiarized_server_url, speech_wav, tmp_path):
    """Each ``curl`` line of the README, run by bash against the server (for ``localhost:8000`` and
    ``$ENDPOINT_URL``), with ``meeting.wav`` four minutes long (7.7 MB, 10 MB as base64): far past the
    96 KB where a base64 argument on the command line breaks."""
    import os
    import shutil
    import subprocess

    import numpy as np

    from speaker_transcripts.pipeline.audio import as_float32, decode_file
    from tests.audio_files import pcm_wav

    samples = as_float32(decode_file(speech_wav).samples)
    (tmp_path / "meeting.wav").write_bytes(pcm_wav(np.resize(samples, 4 * 60 * 16000)))
    assert (tmp_path / "meeting.wav").stat().st_size > 7_000_000
    (tmp_path / "samples").mkdir()
    shutil.copy(ROOT / "samples" / "two-readers.wav", tmp_path / "samples")
    host = undiarized_server_url.removeprefix("http://")
    environment = {**os.environ, "ENDPOINT_URL": undiarized_server_url, "HF_TOKEN": "hf_unused", "API_KEY": "unused"}
    lines = curl_lines()
    assert any("base64 -w0 meeting.wav" in line for line in lines) and len(lines) >= 4, lines
    for line in lines:
        command = line.replace("localhost:8000", host)
        completed = subprocess.run(["bash", "-c", f"set -o pipefail; {command} -w '\\n%{{http_code}}'"], cwd=tmp_path,
                                   env=environment, capture_output=True, text=True, timeout=600, check=False)
        assert completed.returncode == 0, (line, completed.stderr[-500:])
        status = completed.stdout.rstrip().splitlines()[-1]
        assert status == "200", (line, completed.stdout[-500:])


def test_the_live_example_runs_as_written(live_handler, speech_wav, tmp_path, monkeypatch, capsys):
    """The README's realtime example (the openai client), against the live route on tiny models."""
    from servers import serving

    from speaker_transcripts.config import ServerSettings
    from speaker_transcripts.server.app import create_app

    (tmp_path / "meeting.wav").write_bytes(speech_wav)
    monkeypatch.chdir(tmp_path)
    with serving(create_app(lambda: live_handler, ServerSettings())) as base_url:
        code = python_block("client.realtime.connect").replace("http://localhost:8000", base_url)
        exec(compile(code, "README.md", "exec"), {"API_KEY": None})  # noqa: S102 (running the README example is the test)
    printed = capsys.readouterr().out.splitlines()
    assert printed and all(line.startswith("SPEAKER_") for line in printed), printed
