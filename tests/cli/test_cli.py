"""The console command's dispatcher and ``serve``'s checks before any model loads."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from speaker_transcripts import cli
from speaker_transcripts.cli import serve

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_ends_a_command_with_one_line_and_status_130(monkeypatch, capsys):
    from speaker_transcripts.cli import models

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "main", interrupted)
    assert cli.main(["models", "list"]) == cli.EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err.strip() == "speaker-transcripts models: interrupted"


def test_the_console_script_leaves_the_heap_to_the_system_at_exit(monkeypatch):
    """The script's exit freezes the objects the command made (the collector's last pass over a loaded
    model's heap is what kept ``serve`` alive after it had finished), and keeps the command's status."""
    import gc

    events: list[str] = []
    monkeypatch.setattr(cli, "main", lambda: events.append("main") or 3)
    monkeypatch.setattr(gc, "freeze", lambda: events.append("freeze"))
    with pytest.raises(SystemExit) as ended:
        cli.run()
    assert ended.value.code == 3
    assert events == ["main", "freeze"]


def test_the_console_script_and_python_m_run_the_same_entry():
    from importlib.metadata import entry_points

    (script,) = [entry for entry in entry_points(group="console_scripts") if entry.name == "speaker-transcripts"]
    assert script.value == "speaker_transcripts.cli:run"
    assert "run()" in (ROOT / "speaker_transcripts" / "__main__.py").read_text()


def test_ctrl_c_in_a_real_process_prints_no_traceback():
    """SIGINT while a subcommand runs (here one that sleeps): one line on stderr, status 130.
    The child takes Ctrl-C as a terminal's foreground process does: a suite started in the
    background (``nohup pytest &``) passes SIGINT on ignored, and Python keeps it ignored."""
    import signal

    script = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler);"
              " import time, speaker_transcripts.cli as c, speaker_transcripts.cli.models as m;"
              " m.main = lambda argv: (print('ready', flush=True), time.sleep(60)); raise SystemExit(c.main(['models']))")
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 130 and "Traceback" not in err and err.strip() == "speaker-transcripts models: interrupted"


def test_serve_refuses_a_port_in_use_before_loading_anything(monkeypatch, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setitem(sys.modules, "speaker_transcripts.server.app", None)  # importing the app would fail the test
        assert serve.main(["--host", "127.0.0.1", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in capsys.readouterr().err


@pytest.mark.parametrize(("host", "expected"), [("127.0.0.1", None), ("no-such-host.invalid", "")])
def test_a_free_port_binds_and_an_unknown_host_is_named(host, expected):
    problem = serve.unbindable(host, 0)
    assert problem is None if expected is None else problem


def test_serve_checks_its_certificate_and_key_before_loading_anything(tmp_path, capsys, monkeypatch):
    """One without the other, a missing file, a file that is not PEM, a key of another certificate:
    each one line and status 2 at once; a matching pair passes the same check Uvicorn will make."""
    import trustme

    ca = trustme.CA()
    cert, other = ca.issue_cert("speaker-transcripts.test"), ca.issue_cert("elsewhere.test")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    other.private_key_pem.write_to_path(tmp_path / "other-key.pem")
    (tmp_path / "notes.pem").write_text("not a certificate")
    assert serve.unusable_tls(tmp_path / "cert.pem", tmp_path / "key.pem") is None
    assert serve.unusable_tls(None, None) is None
    assert "give both" in serve.unusable_tls(tmp_path / "cert.pem", None)
    assert serve.unusable_tls(tmp_path / "missing.pem", tmp_path / "key.pem").endswith("missing.pem: no such file")
    assert "not a PEM certificate" in serve.unusable_tls(tmp_path / "notes.pem", tmp_path / "key.pem")
    assert "not a PEM certificate and its private key" in serve.unusable_tls(tmp_path / "cert.pem", tmp_path / "other-key.pem")
    monkeypatch.setitem(sys.modules, "speaker_transcripts.server.app", None)  # importing the app would fail the test
    assert serve.main(["--port", "0", "--ssl-certfile", str(tmp_path / "cert.pem")]) == 2
    assert capsys.readouterr().err.strip() == (
        "speaker-transcripts serve: cannot serve HTTPS: give both --ssl-certfile and --ssl-keyfile (or SSL_CERTFILE and SSL_KEYFILE)")


def test_the_container_health_probe_follows_the_port_and_https(monkeypatch):
    from speaker_transcripts.server import healthcheck

    monkeypatch.delenv("PORT", raising=False)
    monkeypatch.delenv("SSL_CERTFILE", raising=False)
    assert healthcheck.health_url() == ("http://127.0.0.1:8080/health", None)
    with socket.socket() as bound:  # a port of ours that nothing listens on
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        monkeypatch.setenv("PORT", str(port))
        monkeypatch.setenv("SSL_CERTFILE", "/certs/cert.pem")
        url, context = healthcheck.health_url()
        assert url == f"https://127.0.0.1:{port}/health" and context is not None
        assert healthcheck.main() == 1, "nothing answers: unhealthy, not a traceback"


@pytest.mark.parametrize("subcommand", sorted(cli.SUBCOMMANDS))
def test_help_reads_as_plain_text(subcommand, capsys):
    """Descriptions come from module docstrings: their reST literals (``KNOWN_SPEAKERS_DIR``) must not show."""
    import importlib

    module = importlib.import_module(f"speaker_transcripts.cli.{cli.SUBCOMMANDS[subcommand][0]}")
    with pytest.raises(SystemExit):
        module.parse_arguments(["--help"])
    shown = capsys.readouterr().out
    assert shown.startswith("usage: speaker-transcripts") and "``" not in shown
