"""``speaker-transcripts live``: in-process and against the server, the transcript printed and saved."""

from __future__ import annotations

import pytest
from servers import serving

from speaker_transcripts.cli import live
from speaker_transcripts.config import ServerSettings
from speaker_transcripts.live.events import Backlog, TranscriptCompleted, TranscriptDelta, TranscriptSegment
from speaker_transcripts.live.transcript import LiveTranscript
from speaker_transcripts.server.app import create_app
from speaker_transcripts.server.realtime_protocol import EventReader, server_event

SAMPLE = "samples/two-readers.wav"


def test_the_transcript_shows_each_final_sentence_once_and_saves_in_the_file_paths_shape():
    transcript = LiveTranscript()
    shown = [transcript.line_for(event) for event in [
        TranscriptDelta("item_1", "Go forward"),
        TranscriptSegment("item_1", "seg_1", "Ann", 0.2, 2.3, "Go forward ten meters."),
        TranscriptCompleted("item_1", "Go forward ten meters.", 2.1, 0.2, 2.3),
        TranscriptCompleted("item_2", " Thanks.", 1.0, 3.0, 4.0),  # a turn without segments (no diarization)
    ]]
    assert shown == [None, "Ann: Go forward ten meters.", None, "Thanks."]
    result = transcript.result()
    assert result["speakers"] == [{"speaker": "Ann", "text": "Go forward ten meters.", "timestamp": [0.2, 2.3]}]
    assert [chunk["text"] for chunk in result["chunks"]] == ["Go forward ten meters.", "Thanks."]


def test_the_event_reader_reads_back_what_the_server_writes():
    events = [TranscriptSegment("item_1", "seg_1", "SPEAKER_00", 0.2, 2.3, "Hi."), TranscriptDelta("item_1", "Hi."),
              Backlog(6.2, behind=True), Backlog(0.8, behind=False)]
    read = EventReader()
    assert [read(server_event(event)) for event in events] == events


def test_a_server_behind_is_shown_with_how_far_and_then_that_it_caught_up():
    assert live.backlog_line(Backlog(6.2, behind=True)).startswith("live: the server is 6 s behind")
    assert live.backlog_line(Backlog(0.8, behind=False)) == "live: caught up"


def test_live_in_process_prints_and_saves(tiny_models, tiny_pyannote, tmp_path, capsys):
    out = tmp_path / "session.json"
    status = live.main([SAMPLE, "--speed", "50", "--asr-model", str(tiny_models["whisper_en"]),
                        "--diarization-model", str(tiny_pyannote), "--language", "en", "--out", str(out)])
    printed = capsys.readouterr()
    assert status == 0 and "live: listening" in printed.err and f"saved the transcript to {out}" in printed.err
    import json

    saved = json.loads(out.read_text())
    assert [f"{piece['speaker']}: {piece['text']}" for piece in saved["speakers"]] == printed.out.splitlines()


def test_live_against_the_server_with_its_key(live_handler, tmp_path, capsys):
    settings = ServerSettings(api_key="sk-cli", live_max_sessions=2)
    with serving(create_app(lambda: live_handler, settings), settings) as base_url:
        out = tmp_path / "session.json"
        status = live.main([SAMPLE, "--speed", "50", "--url", base_url, "--api-key", "sk-cli", "--out", str(out), "--language", "en"])
        printed = capsys.readouterr()
        with pytest.raises(SystemExit, match="HTTP 401: wrong or missing --api-key"):
            live.main([SAMPLE, "--url", base_url, "--api-key", "wrong"])
    import json

    saved = json.loads(out.read_text())
    assert status == 0 and printed.out.strip()
    assert [f"{piece['speaker']}: {piece['text']}" for piece in saved["speakers"]] == printed.out.splitlines()


def test_live_over_wss_with_a_private_cas_certificate_needs_ca_cert_and_says_so(live_handler, tmp_path, capsys, monkeypatch):
    """``serve --ssl-certfile`` with a certificate of one's own CA, the docs' setup for Record from another machine."""
    from servers import certificate_files

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    files = certificate_files(tmp_path)
    tls = {"ssl_certfile": files["ssl_certfile"], "ssl_keyfile": files["ssl_keyfile"]}
    with serving(create_app(lambda: live_handler), **tls) as base_url:
        assert base_url.startswith("https://")
        with pytest.raises(SystemExit, match="certificate is not trusted .*pass --ca-cert"):
            live.main([SAMPLE, "--speed", "50", "--url", base_url, "--language", "en"])
        capsys.readouterr()
        status = live.main([SAMPLE, "--speed", "50", "--url", base_url, "--language", "en", "--ca-cert", files["ca"]])
        assert status == 0 and capsys.readouterr().out.strip()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([SAMPLE, "--speed", "0"], "--speed is a factor"),
        ([SAMPLE, "--out", "x.docx"], "name a .txt, .srt, .vtt or .json file"),
        (["no-such.wav"], "no-such.wav: no such file"),
        ([SAMPLE, "--url", "http://x", "--asr-model", "whisper-base"], "a server has its own"),
        ([], "one of the arguments"),
    ],
)
def test_mistakes_are_one_line_before_anything_loads(arguments, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        live.main(arguments)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("localhost:8765", "ws://localhost:8765/v1/realtime?intent=transcription"),
        ("http://host:8000/v1/realtime", "ws://host:8000/v1/realtime?intent=transcription"),  # the route's own URL, as docs/live.md shows it
        ("https://example.test/speech/", "wss://example.test/speech/v1/realtime?intent=transcription"),
        ("ws://[::1]:9000", "ws://[::1]:9000/v1/realtime?intent=transcription"),
    ],
)
def test_the_server_address_is_taken_as_people_type_it(given, url):
    assert live.realtime_url(given) == url


@pytest.mark.parametrize("given", ["ftp://host", "http://", "localhost:port"])
def test_an_address_that_is_no_server_is_one_line(given):
    with pytest.raises(SystemExit, match="is not a server's address"):
        live.realtime_url(given)


def test_no_server_and_a_busy_server_are_told_apart_from_a_lost_one(live_handler):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(SystemExit, match="could not reach a server at 127.0.0.1:"):
        live.main([SAMPLE, "--url", f"127.0.0.1:{closed_port}"])
    settings = ServerSettings(live_max_sessions=0)
    busy = r"as many live sessions as it takes \(LIVE_MAX_SESSIONS\); try again later"
    with serving(create_app(lambda: live_handler, settings), settings) as base_url, pytest.raises(SystemExit, match=busy):
        live.main([SAMPLE, "--url", base_url])


def test_on_a_terminal_the_words_heard_show_on_one_line_until_the_final_lines_replace_them(monkeypatch):
    import io
    import os

    monkeypatch.setattr(live.shutil, "get_terminal_size", lambda: os.terminal_size((20, 24)))
    screen = io.StringIO()
    heard = live.HeardLine(screen)
    heard.add("item_1", " The Icework")
    heard.add("item_1", " did the design team")
    assert screen.getvalue().endswith("\r\x1b[K… d the design team")  # the line's end, as wide as the terminal
    heard.hide()
    assert screen.getvalue().endswith("\r\x1b[K") and heard.text  # off the line for a notice, kept
    heard.add("item_2", " They did.")  # the next turn is heard before the first one's final text came
    heard.clear("item_1")
    assert heard.text == " They did."
    heard.show()
    assert screen.getvalue().endswith("\r\x1b[K… They did.")  # back under the first turn's final lines
    heard.clear("item_2")
    assert heard.text == ""
    before = screen.getvalue()
    heard.clear("item_2")
    heard.show()
    assert screen.getvalue() == before  # nothing shown: nothing to take off the line, nothing to show
