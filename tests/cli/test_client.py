"""``speaker-transcripts client`` against this repo's own server on 127.0.0.1 (base64 JSON through InferenceClient, and --raw)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import srt

from speaker_transcripts.cli import client

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def online_hub_client(monkeypatch):
    """The suite runs with HF_HUB_OFFLINE=1, which huggingface_hub applies even to 127.0.0.1."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def clip(tmp_path, speech_wav) -> Path:
    path = tmp_path / "clip.wav"
    path.write_bytes(speech_wav)
    return path


def test_base64_and_raw_give_the_same_result(server_url, clip, online_hub_client, capsys):
    pinned = ["language=en", "num_speakers=2", "assisted=false"]  # "auto" may pick either path per request
    assert client.main([str(clip), *pinned, "--url", server_url]) == 0
    as_base64 = json.loads(capsys.readouterr().out)
    assert client.main([str(clip), *pinned, "--url", server_url + "/predict", "--raw"]) == 0
    as_raw = json.loads(capsys.readouterr().out)
    assert as_base64 == as_raw
    assert as_base64["speakers"] and as_base64["warnings"] == [], "num_speakers=2 arrived as the integer 2"


def test_formats_to_a_file_and_diarize_switch(server_url, clip, tmp_path, online_hub_client):
    out = tmp_path / "clip.srt"
    assert client.main([str(clip), "language=en", "--url", server_url, "--format", "srt", "--out", str(out)]) == 0
    cues = list(srt.parse(out.read_text()))
    assert cues and cues[0].content.split(":")[0] in {"ALICE", "BOB"}
    txt = tmp_path / "clip.txt"
    assert client.main([str(clip), "language=en", "--no-diarize", "--url", server_url, "--format", "txt", "--out", str(txt)]) == 0
    assert not txt.read_text().startswith(("ALICE:", "BOB:"))


@pytest.mark.parametrize("raw", [False, True])
def test_server_errors_are_one_line_without_the_token(server_url, clip, online_hub_client, capsys, raw):
    token = "hf_client_secret_token"
    status = client.main([str(clip), "batch_size=0", "--url", server_url + "/predict", "--token", token,
                          *(["--raw"] if raw else [])])
    err = capsys.readouterr().err
    assert status == client.EXIT_FAILED
    assert "batch_size" in err and token not in err and "Traceback" not in err
    client_lines = [line for line in err.splitlines() if not line.startswith("ready: ")]  # the in-process server's start line
    assert len(client_lines) == 1 and "developer.mozilla.org" not in err  # one line, no link to a status page


def test_unreachable_url_and_missing_file(clip, tmp_path, online_hub_client, capsys):
    assert client.main([str(clip), "--url", "http://127.0.0.1:9", "--raw"]) == client.EXIT_FAILED
    assert "request failed" in capsys.readouterr().err
    assert client.main([str(tmp_path / "nope.wav"), "--url", "http://127.0.0.1:9"]) == client.EXIT_FAILED
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="name=value"):
        client.parameters_from(["language"], None)
    assert client.parameters_from(["a=2", "b=true", "c=en", "d=[1]"], False) == {"a": 2, "b": True, "c": "en", "d": [1], "diarize": False}


def test_as_a_command(server_url, clip):
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    completed = subprocess.run(
        [sys.executable, "-m", "speaker_transcripts", "client", str(clip), "language=en", "--url", server_url, "--format", "vtt"],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("WEBVTT") and "<v " in completed.stdout


def test_known_speakers_travel_in_the_json_request_and_not_in_a_query_string(server_url, clip, online_hub_client, capsys):
    """The stand-in diarization embeds no voices, so the server's 400 proves the clips arrived."""
    status = client.main([str(clip), "--url", server_url, "--speaker", f"Ann={clip}"])
    assert status == client.EXIT_FAILED
    assert "needs a diarization pipeline with a speaker-embedding model" in capsys.readouterr().err
    assert client.main([str(clip), "--url", server_url, "--raw", "--speaker", f"Ann={clip}"]) == client.EXIT_USAGE
    assert "drop --raw" in capsys.readouterr().err


def test_a_server_with_a_private_cas_certificate_needs_ca_cert_and_says_so(served_handler, clip, tmp_path, online_hub_client,
                                                                           capsys, monkeypatch):
    """``serve --ssl-certfile`` with a certificate of one's own CA, the docs' setup for Record from another machine."""
    from servers import certificate_files, serving

    from speaker_transcripts.server.app import create_app

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # restored after the test, whatever --ca-cert sets
    files = certificate_files(tmp_path)
    tls = {"ssl_certfile": files["ssl_certfile"], "ssl_keyfile": files["ssl_keyfile"]}
    with serving(create_app(lambda: served_handler), **tls) as url:
        capsys.readouterr()  # the server's start line
        for raw in ([], ["--raw"]):
            assert client.main([str(clip), "language=en", "--url", url + "/predict", *raw]) == client.EXIT_FAILED
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and "not trusted" in err and "--ca-cert" in err, err
        for raw in ([], ["--raw"]):
            assert client.main([str(clip), "language=en", "--url", url + "/predict", "--ca-cert", files["ca"], *raw]) == 0
            assert json.loads(capsys.readouterr().out)["text"]
