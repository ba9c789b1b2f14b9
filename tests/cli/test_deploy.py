"""``speaker-transcripts deploy`` against a local stand-in of the Inference Endpoints API (no internet)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from endpoints_standin import NAMESPACE, EndpointsStandIn
from servers import serving

from speaker_transcripts.cli import deploy

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_deploy_secret_token"
MODELS = ["--asr-model", "openai/whisper-large-v3", "--assistant-model", "distil-whisper/distil-large-v3",
          "--diarization-model", "pyannote/speaker-diarization-community-1"]


def run_deploy(base_url: str, *arguments: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    with tempfile.TemporaryDirectory(prefix="hf-home-") as hf_home:  # removed afterwards: no folders left behind
        env.update(HF_ENDPOINT=base_url, HF_INFERENCE_ENDPOINTS_API=base_url + "/v2", HF_TOKEN=TOKEN, HF_HOME=hf_home)
        return _deploy(env, arguments)


def _deploy(env: dict[str, str], arguments: tuple[str, ...]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "speaker_transcripts", "deploy", "--poll", "0.05", "--timeout", "30", *arguments], cwd=ROOT, env=env,
                          check=False, capture_output=True, text=True, timeout=120)


def test_create_sends_custom_task_env_secret_scaling_and_waits(tmp_path):
    stand_in = EndpointsStandIn(["pending", "initializing", "running"])
    with serving(stand_in.app) as base_url:
        completed = run_deploy(base_url, "--name", "speaker-transcripts", "--repository", "alice/handler-repo", *MODELS,
                               "--env", "MAX_AUDIO_SECONDS=3600")
    assert completed.returncode == 0, completed.stderr
    created = next(r for r in stand_in.requests if r["method"] == "POST")
    assert created["path"] == f"/v2/endpoint/{NAMESPACE}" and created["authorization"] == f"Bearer {TOKEN}"
    body = created["json"]
    assert body["name"] == "speaker-transcripts"
    assert body["model"]["repository"] == "alice/handler-repo"
    assert body["model"]["task"] == "custom" and body["model"]["framework"] == "pytorch"
    assert body["model"]["env"] == {
        "MAX_AUDIO_SECONDS": "3600",
        "ASR_MODEL": "openai/whisper-large-v3",
        "ASSISTANT_MODEL": "distil-whisper/distil-large-v3",
        "DIARIZATION_MODEL": "pyannote/speaker-diarization-community-1",
    }
    assert body["model"]["secrets"] == {"HF_TOKEN": TOKEN}, "the token travels as a secret, not an env var"
    assert body["compute"] == {
        "accelerator": "gpu", "instanceSize": "x1", "instanceType": "nvidia-a10g",
        "scaling": {"minReplica": 0, "maxReplica": 1, "scaleToZeroTimeout": 15},
    }
    assert body["provider"] == {"vendor": "aws", "region": "us-east-1"}
    for state in ("pending", "initializing", "running"):
        assert f"speaker-transcripts: {state}" in completed.stdout
    assert "ready: https://speaker-transcripts.example.endpoints" in completed.stdout
    assert TOKEN not in completed.stdout + completed.stderr


def test_existing_endpoint_is_updated_not_recreated():
    existing = {"speaker-transcripts": {"name": "speaker-transcripts", "model": {"repository": "alice/old"}, "type": "protected"}}
    stand_in = EndpointsStandIn(["updating", "running"], existing)
    with serving(stand_in.app) as base_url:
        completed = run_deploy(base_url, "--name", "speaker-transcripts", "--repository", "alice/handler-repo",
                               "--namespace", NAMESPACE, "--diarization-model", "pyannote/x", "--instance-type", "nvidia-l4",
                               "--min-replica", "1", "--max-replica", "2")
    assert completed.returncode == 0, completed.stderr
    methods = [r["method"] for r in stand_in.requests]
    assert "POST" not in methods and "PUT" in methods
    updated = next(r for r in stand_in.requests if r["method"] == "PUT")["json"]
    assert updated["model"]["repository"] == "alice/handler-repo" and updated["model"]["env"] == {"DIARIZATION_MODEL": "pyannote/x"}
    assert updated["model"]["secrets"] == {"HF_TOKEN": TOKEN}
    assert updated["compute"]["instanceType"] == "nvidia-l4"
    assert updated["compute"]["scaling"]["minReplica"] == 1 and updated["compute"]["scaling"]["maxReplica"] == 2
    assert "updating" in completed.stdout


def test_failed_deployment_is_a_clear_error():
    stand_in = EndpointsStandIn(["pending", "failed"])
    with serving(stand_in.app) as base_url:
        completed = run_deploy(base_url, "--name", "broken", "--repository", "alice/handler-repo")
    assert completed.returncode == 1
    assert "deployment failed (failed): Endpoint failed to start: handler raised RuntimeError" in completed.stderr
    assert "Traceback" not in completed.stderr and TOKEN not in completed.stderr


def test_api_refusal_is_a_clear_error():
    with serving(EndpointsStandIn(["pending"]).app) as base_url:
        refused = run_deploy(base_url + "/nowhere", "--name", "x", "--repository", "alice/r", "--namespace", NAMESPACE)
    assert refused.returncode == 1 and "refused the request" in refused.stderr
    assert "Traceback" not in refused.stderr and TOKEN not in refused.stderr


def test_an_unreachable_api_is_one_line_not_a_traceback():
    import socket

    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unreachable = run_deploy(f"http://127.0.0.1:{port}", "--name", "x", "--repository", "alice/r", "--namespace", NAMESPACE)
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith("could not reach the Inference Endpoints API (")
    assert len(unreachable.stderr.strip().splitlines()) == 1 and TOKEN not in unreachable.stderr


def test_waiting_gives_up_after_the_timeout():
    with serving(EndpointsStandIn(["pending"]).app) as base_url:
        stuck = run_deploy(base_url, "--name", "slow", "--repository", "alice/r", "--timeout", "0.3")
    assert stuck.returncode == 1 and "still 'pending' after 0.3 s" in stuck.stderr


def test_dry_run_prints_the_request_with_the_token_redacted(capsys):
    assert deploy.main(["--name", "demo", "--repository", "alice/r", "--namespace", NAMESPACE, "--token", TOKEN, "--dry-run", *MODELS]) == 0
    printed = capsys.readouterr().out
    assert TOKEN not in printed
    import json

    request = json.loads(printed)
    assert request["method"] == "POST" and request["url"].endswith(f"/endpoint/{NAMESPACE}")
    assert request["headers"]["authorization"] == "Bearer ***"
    assert request["json"]["model"]["secrets"] == {"HF_TOKEN": "***"}
    assert request["json"]["model"]["env"]["DIARIZATION_MODEL"] == "pyannote/speaker-diarization-community-1"
    assert request["json"]["model"]["task"] == "custom"


def test_env_arguments_are_checked():
    arguments = deploy.parse_arguments(["--name", "n", "--repository", "r", "--env", "HF_TOKEN=x"])
    with pytest.raises(SystemExit, match="secret"):
        deploy.spec_from_arguments(arguments, TOKEN)
    arguments = deploy.parse_arguments(["--name", "n", "--repository", "r", "--env", "novalue"])
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        deploy.spec_from_arguments(arguments, TOKEN)
    pinned = deploy.spec_from_arguments(deploy.parse_arguments(["--name", "n", "--repository", "r", "--min-replica", "1"]), None)
    assert pinned.scale_to_zero_timeout is None and pinned.secrets == {}


def test_dry_run_without_a_namespace_shows_a_readable_placeholder(capsys):
    import json

    assert deploy.main(["--name", "demo", "--repository", "alice/r", "--token", TOKEN, "--dry-run"]) == 0
    request = json.loads(capsys.readouterr().out)
    assert request["url"].endswith("/endpoint/<namespace of the token>"), request["url"]


@pytest.mark.parametrize("name", ["Bad_Name", "UPPER", "-leading", "trailing-", "under_score", "x" * 33, ""])
def test_names_endpoints_would_refuse_fail_before_any_call(name, capsys):
    with pytest.raises(SystemExit):
        deploy.parse_arguments([f"--name={name}", "--repository", "alice/r", "--dry-run"])
    assert "not a valid endpoint name" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["a", "speaker-transcripts", "x" * 32, "v2-0"])
def test_valid_names_pass(name):
    assert deploy.parse_arguments(["--name", name, "--repository", "alice/r"]).name == name


def test_an_image_of_the_containerfile_is_deployed_as_a_custom_container(capsys):
    import json

    image = "ghcr.io/alice/speaker-transcripts:cpu"
    assert deploy.main(["--name", "demo", "--repository", "alice/r", "--namespace", NAMESPACE, "--token", TOKEN, "--dry-run",
                        "--image", image, "--accelerator", "cpu"]) == 0
    model = json.loads(capsys.readouterr().out)["json"]["model"]
    assert model["image"] == {"custom": {"url": image, "port": 8080, "healthRoute": "/health"}}
    assert TOKEN not in json.dumps(model) and model["secrets"] == {"HF_TOKEN": "***"}
