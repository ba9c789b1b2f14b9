"""The page (GET /) in a real Chromium: upload a recording, read and rename the speakers, export;
record from a (fake) microphone through the live route; the errors people meet.

Debian's ``chromium`` (``.ci/run`` installs it) driven by Playwright; the server runs the real
embedded ``whisper-tiny.en`` and ``pyannote-campplus`` (pulled on first use, as in
tests/end_to_end/test_embedded_real.py), so the words and speakers on the page are real.
``PAGE_SCREENSHOTS=docs/images`` saves the screenshots the docs show.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect
from servers import serving

from speaker_transcripts.config import ModelSettings, ServerSettings
from speaker_transcripts.server.app import create_app

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "two-readers.wav"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="needs Debian's chromium (apt-get install chromium; .ci/run does)")
DENY_MICROPHONE = Path(__file__).resolve().parent / "deny_microphone.js"
GUARD_MS = 180_000  # a failure guard for waits, never a pace the tests rely on
# Record's WebRTC calls on loopback (the servers' WEBRTC_HOSTS, tests/conftest.py): Chromium offers its loopback
# address, and its real addresses rather than mDNS names (no multicast announcements).
LOOPBACK_WEBRTC = ["--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns"]


@pytest.fixture(scope="module")
def real_handler():
    from speaker_transcripts.pipeline.transcriber import Transcriber

    return Transcriber(settings=ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus"))


@pytest.fixture(scope="module")
def page_url(real_handler):
    with serving(create_app(lambda: real_handler, ServerSettings())) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def microphone_wav(tmp_path_factory) -> Path:
    """The sample as Chromium's fake microphone plays it (16-bit PCM WAV), with quiet after it."""
    import av
    import numpy as np

    from speaker_transcripts.pipeline.audio import as_float32, decode_file

    samples = np.concatenate([as_float32(decode_file(SAMPLE.read_bytes()).samples), np.zeros(16000 * 4, dtype=np.float32)])
    path = tmp_path_factory.mktemp("microphone") / "speech.wav"
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=16000, layout="mono")
        frame = av.AudioFrame.from_ndarray((samples * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = 16000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return path


@pytest.fixture(scope="module")
def browser(microphone_wav):
    from playwright.sync_api import sync_playwright

    arguments = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={microphone_wav}", "--autoplay-policy=no-user-gesture-required", *LOOPBACK_WEBRTC]
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=arguments)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.problems = []  # console errors and uncaught exceptions: a test fails on any
    opened.on("console", lambda message: opened.problems.append(message.text) if message.type == "error" else None)
    opened.on("pageerror", lambda error: opened.problems.append(str(error)))
    yield opened
    context.close()


def screenshot(page, name: str) -> None:
    """With PAGE_SCREENSHOTS=FOLDER: the page as shown (1280x800) and as a phone shows it (390 px wide, ``-narrow``)."""
    folder = os.environ.get("PAGE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
        shown = page.viewport_size
        page.set_viewport_size({"width": 390, "height": 844})
        page.screenshot(path=str(Path(folder) / f"{name}-narrow.png"), full_page=True)
        page.set_viewport_size(shown)


def test_a_recording_is_transcribed_with_speakers_renamed_and_exported(page, page_url):
    page.goto(page_url + "/")
    assert page.title().startswith("Who said what")
    page.set_input_files("#file-input", str(SAMPLE))
    page.evaluate("""() => {  // every value the progress bar and the status line take
      window.seen = { progress: [], status: [] };
      new MutationObserver(() => window.seen.progress.push(document.getElementById("progress").getAttribute("value")))
        .observe(document.getElementById("progress"), { attributes: true, attributeFilter: ["value"] });
      new MutationObserver(() => window.seen.status.push(document.getElementById("status").textContent))
        .observe(document.getElementById("status"), { childList: true, characterData: true, subtree: true });
    }""")
    page.get_by_role("button", name="Transcribe").click()
    expect(page.locator("#status")).to_have_text(re.compile("^Done"), timeout=GUARD_MS)
    seen = page.evaluate("window.seen")
    values = [float(value) for value in seen["progress"] if value is not None]
    assert None in seen["progress"] and values and values == sorted(values) and values[-1] > 0.5, seen
    assert any(re.fullmatch(r"Uploading two-readers\.wav \(\d+ kB\)…", status) for status in seen["status"]), seen["status"]
    assert any(re.fullmatch(r"Transcribing: 0:\d\d of 0:1\d…", status) for status in seen["status"]), seen["status"]
    assert "Finding the speech…" in seen["status"]  # the server's stages as they happen, not "Uploading" until the words
    assert page.locator("#cancel").is_hidden()
    names = page.locator("#speakers input")
    assert names.count() == 2 and names.nth(0).input_value() == "SPEAKER_00"
    transcript = page.locator("#transcript").inner_text().lower()
    assert "forward" in transcript and "dashwood" in transcript
    assert page.locator(".turn-bar").count() >= 3  # the timeline: A, B, A

    first_turn = page.locator(".turn").first.bounding_box()
    assert 0 <= first_turn["y"] and first_turn["y"] + first_turn["height"] <= 800  # the transcript on the first screen
    assert page.locator(".lane-name").all_inner_texts() == ["SPEAKER_00", "SPEAKER_01"]
    ticks = page.locator(".tick").all_inner_texts()
    assert ticks[0] == "0:00" and len(ticks) >= 3 and all(re.fullmatch(r"0:\d\d", tick) for tick in ticks), ticks

    names.nth(0).fill("Reader\u2028\u2029 A\u0007")  # separators and a control character: one name on one line
    names.nth(0).dispatch_event("change")
    assert names.nth(0).input_value() == "Reader A"
    assert page.locator(".turn-speaker").first.inner_text() == "Reader A"
    assert page.locator(".turn-move").first.locator("option:checked").inner_text() == "Reader A"
    assert page.locator(".lane-name").all_inner_texts() == ["Reader A", "SPEAKER_01"]
    with page.expect_download() as download:
        page.get_by_role("button", name="Text").click()
    exported = Path(download.value.path()).read_text()
    assert exported.startswith("Reader A: Go forward") and "SPEAKER_01:" in exported and "SPEAKER_00" not in exported
    with page.expect_download() as download:
        page.get_by_role("button", name="RTTM").click()
    assert "Reader_A" in Path(download.value.path()).read_text()

    word = page.locator(".word").nth(3)
    word.click()
    page.locator(".word.current").wait_for(timeout=GUARD_MS)
    screenshot(page, "page-recording")
    player_keys_and_timeline(page)
    assert page.problems == []


def player_keys_and_timeline(page) -> None:
    """Space plays and pauses (not while typing in a field), the arrows seek 5 s, a click on a lane plays from
    where it lands, and the player stays on screen while the transcript scrolls."""
    def player() -> dict:
        return page.evaluate("(({ paused, currentTime, duration }) => ({ paused, currentTime, duration }))(document.getElementById('player'))")

    def playing() -> None:  # polled from here: the page's CSP refuses wait_for_function's string predicates
        deadline = time.monotonic() + GUARD_MS / 1000
        while player()["paused"]:
            assert time.monotonic() < deadline, "the player never started"
            time.sleep(0.05)

    lane = page.locator(".lane").first
    box = lane.bounding_box()
    clicked = time.monotonic()
    lane.click(position={"x": box["width"] / 2, "y": box["height"] / 2})
    playing()
    state = player()
    played = time.monotonic() - clicked  # at most this much has played since the seek, however slow the machine
    assert state["duration"] / 2 - 0.5 <= state["currentTime"] <= state["duration"] / 2 + played + 0.5, (state, played)
    page.keyboard.press("Space")
    assert player()["paused"]
    page.evaluate("document.getElementById('player').currentTime = 1")
    page.keyboard.press("ArrowRight")
    assert player()["currentTime"] == pytest.approx(6.0, abs=0.01)
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert player()["currentTime"] == 0
    name = page.locator("#speakers input").nth(1)
    name.click()
    page.keyboard.press("Space")
    assert player()["paused"] and name.input_value() == "SPEAKER_01 "  # a space typed, not a play
    page.locator(".word").first.click()
    playing()
    page.keyboard.press("Space")
    assert player()["paused"]  # the word's click played; Space paused it
    page.evaluate("document.getElementById('transcript').style.paddingBottom = '2000px'; window.scrollTo(0, document.body.scrollHeight)")
    bar = page.locator(".player-bar").bounding_box()
    assert 0 <= bar["y"] <= 1 and page.locator("#player").is_visible()


def subtitle_text(subtitles: str) -> str:
    """The words of SRT or WebVTT cues in order, without cue numbers, times and speaker labels."""
    lines = [line for line in subtitles.splitlines() if line and not line.isdigit() and "-->" not in line and line != "WEBVTT"]
    return " ".join(re.sub(r"^SPEAKER_\d+: |</?v[^>]*>", "", line) for line in lines)


def download(page, label: str) -> str:
    with page.expect_download() as file:
        page.get_by_role("button", name=label, exact=True).click()
    return Path(file.value.path()).read_text()


def test_the_transcript_is_corrected_merged_and_undone_and_the_downloads_carry_it(page, page_url):
    page.goto(page_url + "/")
    page.set_input_files("#file-input", str(SAMPLE))
    page.get_by_role("button", name="Transcribe").click()
    expect(page.locator("#status")).to_have_text(re.compile("^Done"), timeout=GUARD_MS)
    assert page.locator(".turn").count() == 3 and page.get_by_role("button", name="Undo").is_disabled()

    page.locator(".turn").nth(1).get_by_role("button", name="Edit").click()  # SPEAKER_01's sentence, fewer words
    page.get_by_label("The turn's words").fill("And Mr. John Dashwood had the leisure to consider it.")
    page.get_by_role("button", name="Save").click()
    assert page.locator(".turn").nth(1).locator("p").inner_text() == "And Mr. John Dashwood had the leisure to consider it."
    assert "SPEAKER_01: And Mr. John Dashwood had the leisure to consider it.\n" in download(page, "Text")
    for label in ("SRT", "WebVTT"):  # made by the server's subtitle rules from the corrected words
        exported = download(page, label)
        assert "Dashwood had the leisure to consider it." in subtitle_text(exported)
        assert all(len(re.sub(r"</?v[^>]*>", "", line)) <= 42 for line in exported.splitlines() if "-->" not in line)  # as shown
    words = [word["text"].strip() for word in json.loads(download(page, "JSON"))["words"]]
    assert words[words.index("Dashwood"):][:7] == ["Dashwood", "had", "the", "leisure", "to", "consider", "it."]

    page.locator(".turn").nth(2).get_by_label(re.compile("Speaker of the turn")).select_option("SPEAKER_01")
    assert page.locator(".turn").count() == 2  # the moved turn joins the one before it
    assert download(page, "Text").splitlines()[-1].endswith("consider it. Go forward 10 meters.")
    last = download(page, "RTTM").splitlines()[-1].split()
    assert last[7] == "SPEAKER_01" and float(last[3]) > 11.0  # the timeline moved with it
    page.get_by_role("button", name="Undo").click()
    assert page.locator(".turn").count() == 3 and page.locator(".turn-speaker").nth(2).inner_text() == "SPEAKER_00"

    # a turn's edge: from a clicked word, the rest of the turn to the next speaker, or the start up to it to the previous
    page.locator(".turn").first.locator(".word").last.click()  # "meters."
    screenshot(page, "page-turn-edge")
    page.get_by_role("button", name=re.compile("^Move the words from “meters.” to the end of this turn to SPEAKER_01")).click()
    assert page.locator(".turn").first.locator("p").inner_text() == "Go forward 10"
    assert page.locator(".turn").nth(1).locator("p").inner_text().startswith("meters. And Mr. John Dashwood")
    moved = "SPEAKER_01: meters. And Mr. John Dashwood had the leisure to consider it."
    assert download(page, "Text").splitlines()[:2] == ["SPEAKER_00: Go forward 10", moved]
    page.locator(".turn").nth(2).locator(".word").first.click()  # "Go" of the last turn
    page.get_by_role("button", name=re.compile("^Move the words from the start of this turn to “Go” to SPEAKER_01")).click()
    assert page.locator(".turn").nth(2).locator("p").inner_text() == "forward 10 meters."
    page.get_by_role("button", name="Undo").click()
    page.get_by_role("button", name="Undo").click()
    assert page.locator(".turn p").first.inner_text() == "Go forward 10 meters."

    names = page.locator("#speakers input")
    names.nth(0).fill("Ann")
    names.nth(0).dispatch_event("change")
    page.once("dialog", lambda dialog: dialog.dismiss())
    names.nth(1).fill("Ann")
    names.nth(1).dispatch_event("change")
    assert names.count() == 2 and names.nth(1).input_value() == "SPEAKER_01"  # not merged: the name put back
    asked = []
    page.once("dialog", lambda dialog: asked.append(dialog.message) or dialog.accept())
    names.nth(1).fill("Ann")
    names.nth(1).dispatch_event("change")
    assert asked == ["Ann is already a speaker here. Merge SPEAKER_01 into Ann? Their turns become one person's."]
    assert names.count() == 1 and page.locator(".turn").count() == 1 and page.locator(".lane").count() == 1
    assert download(page, "Text").startswith("Ann: Go forward 10 meters. And Mr. John Dashwood had the leisure")
    page.locator("h2#result-heading").click()  # Ctrl+Z from the page, not from a field
    page.keyboard.press("Control+z")
    assert names.count() == 2 and page.locator(".turn").count() == 3
    assert page.problems == []


@contextlib.contextmanager
def transcribing_with(browser, handler):
    """A page on a server of ``handler`` with the sample chosen and Transcribe clicked: (page, the server's URL)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        with serving(create_app(lambda: handler, ServerSettings())) as base_url:
            page.goto(base_url + "/")
            page.set_input_files("#file-input", str(SAMPLE))
            page.get_by_role("button", name="Transcribe").click()
            yield page, base_url
    finally:
        context.close()


def test_a_warning_names_the_speakers_as_they_are_named_now(browser, real_handler):
    """The server's warnings name speakers by label; on the page they follow a rename."""
    class Warned:
        def __getattr__(self, name):
            return getattr(real_handler, name)

        def __call__(self, data, **options):
            result = real_handler(data, **options)
            return {**result, "warnings": [*result.get("warnings", []), "SPEAKER_00 and SPEAKER_01 sound alike and may be one person."]}

    with transcribing_with(browser, Warned()) as (page, _):
        expect(page.locator("#status")).to_have_text(re.compile("^Done"), timeout=GUARD_MS)
        assert page.locator("#status").inner_text().endswith("Note: SPEAKER_00 and SPEAKER_01 sound alike and may be one person.")
        names = page.locator("#speakers input")
        names.nth(1).fill("Ben")
        names.nth(1).dispatch_event("change")
        assert page.locator("#status").inner_text().endswith("Note: SPEAKER_00 and Ben sound alike and may be one person.")


def test_cancel_stops_the_servers_work_too(browser, real_handler):
    """Cancel while the server transcribes (its work held until it is told to stop): the page says it
    was cancelled, the server's work ends (its ``should_stop`` said yes) and it counts the request
    abandoned, and the next request is served."""
    import threading

    from speaker_transcripts.errors import RequestAbandoned

    working, stopped = threading.Event(), threading.Event()

    class Held:
        def __getattr__(self, name):
            return getattr(real_handler, name)

        def __call__(self, data, should_stop=lambda: False, **callbacks):
            if not stopped.is_set():
                working.set()
                deadline = time.monotonic() + 120  # a failure guard only
                while not should_stop() and time.monotonic() < deadline:
                    time.sleep(0.05)
                stopped.set()
                raise RequestAbandoned("cancelled")
            return real_handler(data, should_stop=should_stop, **callbacks)

    with transcribing_with(browser, Held()) as (page, base_url):
        assert working.wait(GUARD_MS / 1000)
        page.get_by_role("button", name="Cancel").click()
        expect(page.locator("#status")).to_have_text(re.compile("^Cancelled"), timeout=GUARD_MS)
        assert stopped.wait(GUARD_MS / 1000), "the server went on working for a client that left"
        assert page.locator("#error").is_hidden() and page.locator("#cancel").is_hidden()
        metrics = httpx.get(base_url + "/metrics").text
        assert re.search(r"^speaker_transcripts_abandoned_requests_total 1\.0$", metrics, flags=re.MULTILINE), metrics[-500:]
        page.get_by_role("button", name="Transcribe").click()
        expect(page.locator("#status")).to_have_text(re.compile("^Done"), timeout=GUARD_MS)


def test_the_record_button_transcribes_the_microphone_live(page, page_url):
    page.goto(page_url + "/")
    page.locator("summary").click()  # Options open: Record closes them, so the live words are on the first screen
    page.evaluate("""() => {  // the level the meter shows, sample by sample
      window.levels = [];
      new MutationObserver(() => window.levels.push(Number(document.getElementById("record-level").value)))
        .observe(document.getElementById("record-level"), { attributes: true, attributeFilter: ["value"] });
    }""")
    record = page.get_by_role("button", name="Record")
    record.click()
    expect(page.locator("#record")).to_have_attribute("aria-pressed", "true", timeout=GUARD_MS)
    expect(page.locator("#status")).to_contain_text("Listening (WebRTC)")  # the server offers calls: Record opens one
    expect(page.locator("#record-clock")).to_have_text(re.compile(r"^0:0[2-9]|^0:[1-5]\d"), timeout=GUARD_MS)  # it counts
    expect(page.locator("#transcript")).to_contain_text("Dashwood", timeout=GUARD_MS)  # the second reader, live
    screenshot(page, "page-live")
    first_word = page.locator("#transcript .word").first.bounding_box()
    assert 0 <= first_word["y"] <= 800 - first_word["height"], first_word  # 1280x800: not below the fold
    levels = page.evaluate("window.levels")
    assert max(levels) > 0.5 and min(levels) < max(levels), "the meter follows the voice"
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#status")).to_have_text(re.compile("^Stopped"), timeout=GUARD_MS)
    assert "forward" in page.locator("#transcript").inner_text().lower()
    assert page.locator("#player").get_attribute("src").startswith("blob:")  # the recording stays to listen to
    first_turn = page.locator(".turn").first.bounding_box()
    assert 0 <= first_turn["y"] and first_turn["y"] + first_turn["height"] <= 800  # scrolled to it, as after an upload
    assert page.problems == []


def test_record_names_the_people_of_the_voice_library(browser, tmp_path):
    """Record with the voice library's three people ticked (the default: all): the live session names both readers
    from their library voices and nobody as the third, as the file path and ``live --speaker`` do."""
    from speaker_transcripts.pipeline.transcriber import Transcriber

    handler = Transcriber(settings=ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus",
                                                 known_speakers_dir=tmp_path / "voices", warmup=False))
    for name, clip in (("Impostor", "impostor.wav"), ("Reader A", "reader-a.wav"), ("Reader B", "reader-b.wav")):
        handler.enrol(name, (SAMPLE.parent / "enrolment" / clip).read_bytes())
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    try:
        with serving(create_app(lambda: handler, ServerSettings())) as base_url:
            page.goto(base_url + "/")
            expect(page.locator("#library-people input:checked")).to_have_count(3, timeout=GUARD_MS)
            page.get_by_role("button", name="Record").click()
            expect(page.locator("#transcript")).to_contain_text("Dashwood", timeout=GUARD_MS)  # the second reader's words, live
            page.get_by_role("button", name="Stop").click()
            expect(page.locator("#status")).to_have_text(re.compile("^Stopped"), timeout=GUARD_MS)
            names = [field.input_value() for field in page.locator("#speakers input").all()]
    finally:
        context.close()
    assert sorted(names) == ["Reader A", "Reader B"], names
    assert problems == []


@pytest.mark.parametrize("webrtc", [True, False], ids=["call", "websocket"])
def test_record_with_a_key_opens_its_session_with_a_client_secret_not_the_key(browser, real_handler, webrtc):
    """With ``API_KEY``, Record mints a client secret with the key and opens the session with the secret: a
    WebRTC call where the server offers one, the WebSocket (the secret as its subprotocol) where it does not."""
    settings = ServerSettings(api_key="sk-record", webrtc=webrtc)
    app = create_app(lambda: real_handler, settings)
    with serving(app, settings) as base_url:
        context = browser.new_context()
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        sent: list[tuple[str, str | None]] = []  # each request's URL and Authorization, and each WebSocket's URL
        page.on("request", lambda request: sent.append((request.url, request.headers.get("authorization"))))
        page.on("websocket", lambda socket: sent.append((socket.url, None)))
        page.goto(base_url + "/")
        page.fill("#api-key", "sk-record")
        page.click("#key-save")
        expect(page.locator("#status")).to_contain_text("Key accepted", timeout=GUARD_MS)
        problems.clear()  # what the page asked for before it had the key was refused, as it should be
        page.get_by_role("button", name="Record").click()
        expect(page.locator("#status")).to_contain_text(f"Listening ({'WebRTC' if webrtc else 'WebSocket'})", timeout=GUARD_MS)
        expect(page.locator("#transcript")).to_contain_text("Dashwood", timeout=GUARD_MS)
        page.get_by_role("button", name="Stop").click()
        expect(page.locator("#status")).to_have_text(re.compile("^Stopped"), timeout=GUARD_MS)
        context.close()
    minted = [auth for url, auth in sent if url.endswith("/v1/realtime/client_secrets")]
    calls = [auth for url, auth in sent if "/v1/realtime/calls" in url]
    sockets = [url for url, _ in sent if url.startswith("ws")]
    assert minted == ["Bearer sk-record"]  # the key goes to mint the secret, and nowhere near the audio
    assert all(auth.startswith("Bearer ek_") for auth in calls) and len(calls) == webrtc and len(sockets) == (not webrtc)
    assert not any("sk-record" in url for url, _ in sent) and problems == []


def test_record_falls_back_to_the_websocket_when_its_call_is_refused(page, real_handler):
    """The one UDP port of ``WEBRTC_PORTS`` is taken (another program holds it): the server answers the
    call 503, and Record goes on over the WebSocket, which needs no UDP port."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        settings = ServerSettings(webrtc_ports=f"{port}-{port}")
        with serving(create_app(lambda: real_handler, settings), settings) as base_url:
            warnings: list[str] = []
            page.on("console", lambda message: warnings.append(message.text) if message.type == "warning" else None)
            page.goto(base_url + "/")
            page.get_by_role("button", name="Record").click()
            expect(page.locator("#status")).to_contain_text("Listening (WebSocket)", timeout=GUARD_MS)
            expect(page.locator("#transcript")).to_contain_text("Dashwood", timeout=GUARD_MS)
            page.get_by_role("button", name="Stop").click()
            expect(page.locator("#status")).to_have_text(re.compile("^Stopped"), timeout=GUARD_MS)
    assert warnings == ["WebRTC call failed (the server answered the call 503); recording over the WebSocket instead"]
    assert page.problems == ["Failed to load resource: the server responded with a status of 503 (Service Unavailable)"]  # Chromium's line for the call's answer


def test_record_works_over_https_on_a_remote_name_and_says_why_not_over_plain_http(browser, microphone_wav, real_handler, tmp_path):
    """The page as another machine opens it (a host name that is not localhost, mapped to 127.0.0.1 in
    Chromium only): over ``serve --ssl-certfile/--ssl-keyfile`` (a throwaway CA's certificate) Record
    streams over wss:// (``WEBRTC=false``) and words come back; over plain http the browser gives no microphone, and the
    page says why and what to do instead of "No microphone was found"."""
    import trustme

    certificate = trustme.CA().issue_cert("speaker-transcripts.test")
    certificate.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    certificate.private_key_pem.write_to_path(tmp_path / "key.pem")
    arguments = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--host-resolver-rules=MAP speaker-transcripts.test 127.0.0.1", "--ignore-certificate-errors",
                 "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={microphone_wav}"]
    tls = {"ssl_certfile": str(tmp_path / "cert.pem"), "ssl_keyfile": str(tmp_path / "key.pem")}
    chromium = browser.browser_type.launch(executable_path=CHROMIUM, headless=True, args=arguments)  # its own flags
    try:
        page = chromium.new_page()
        named = ServerSettings(webrtc=False, allowed_hosts="speaker-transcripts.test")  # a keyless server answers known names only
        with serving(create_app(lambda: real_handler, named), **tls) as base_url:
            page.goto(base_url.replace("127.0.0.1", "speaker-transcripts.test") + "/")
            assert page.evaluate("window.isSecureContext") and page.locator("#record-note").is_hidden()
            page.get_by_role("button", name="Record").click()
            expect(page.locator("#transcript")).to_contain_text("forward", timeout=GUARD_MS)
            page.get_by_role("button", name="Stop").click()
            expect(page.locator("#status")).to_have_text(re.compile("^Stopped"), timeout=GUARD_MS)
        with serving(create_app(lambda: real_handler, ServerSettings(allowed_hosts="speaker-transcripts.test"))) as base_url:
            page.goto(base_url.replace("127.0.0.1", "speaker-transcripts.test") + "/")
            expect(page.locator("#record")).to_be_disabled()
            expect(page.locator("#record-note")).to_contain_text("only to pages served over https://")
            expect(page.locator("#record-note")).to_contain_text("--ssl-certfile")
    finally:
        chromium.close()


def test_the_page_asks_for_the_key_and_says_when_it_is_wrong(browser, real_handler):
    settings = ServerSettings(api_key="sk-page")
    with serving(create_app(lambda: real_handler, settings), settings) as base_url:
        context = browser.new_context()
        page = context.new_page()
        page.goto(base_url + "/")
        page.wait_for_selector("#key-panel:not([hidden])", timeout=GUARD_MS)
        page.fill("#api-key", "wrong")
        page.click("#key-save")
        page.wait_for_selector("#error:not([hidden])", timeout=GUARD_MS)
        wrong = page.inner_text("#error")
        page.fill("#api-key", "sk-page")
        page.click("#key-save")
        expect(page.locator("#status")).to_contain_text("Key accepted", timeout=GUARD_MS)
        assert page.url.endswith("/")  # the key never goes in a URL
        expect(page.locator("#key-panel")).to_be_hidden()  # asked for once: out of the way once accepted
        page.reload(wait_until="networkidle")  # GET /ready answered and read
        expect(page.locator("#key-panel")).to_be_hidden()  # still kept for this tab
        context.close()
    assert "API key is wrong" in wrong


def test_a_speaker_is_saved_to_the_voice_library_and_the_people_chosen_are_named(browser, tmp_path):
    """With the server's key: "Save voice" on a speaker of a result enrols them (their turns alone, cut in the
    browser), the library's people appear in Options, the next recording names them, and unticked they are not."""
    from speaker_transcripts.pipeline.transcriber import Transcriber

    library = tmp_path / "voices"
    handler = Transcriber(settings=ModelSettings(asr_model="whisper-tiny.en", diarization_model="pyannote-campplus",
                                                 known_speakers_dir=library, warmup=False))
    settings = ServerSettings(api_key="sk-voices")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))

    class Noting:
        """The handler, noting each transcription's parameters (Chromium gives Playwright no multipart body)."""

        def __init__(self) -> None:
            self.parameters: list[dict] = []

        def __call__(self, data: dict, **callbacks: object) -> dict:
            self.parameters.append(data["parameters"])
            return handler(data, **callbacks)

        def __getattr__(self, name: str) -> object:
            return getattr(handler, name)

    noting = Noting()

    def transcribe() -> list[str]:
        page.get_by_role("button", name="Transcribe").click()
        expect(page.locator("#status")).to_have_text(re.compile("^Done"), timeout=GUARD_MS)
        return [field.input_value() for field in page.locator("#speakers input").all()]

    try:
        with serving(create_app(lambda: noting, settings), settings) as base_url:
            page.goto(base_url + "/")
            page.fill("#api-key", "sk-voices")
            page.click("#key-save")
            expect(page.locator("#status")).to_contain_text("Key accepted", timeout=GUARD_MS)
            assert page.locator("#library").is_hidden()  # nobody enrolled yet
            page.set_input_files("#file-input", str(SAMPLE))
            assert transcribe() == ["SPEAKER_00", "SPEAKER_01"]
            page.once("dialog", lambda dialog: dialog.accept("Reader A"))
            page.get_by_role("button", name="Save the voice of SPEAKER_00 in the voice library").click()
            expect(page.locator("#status")).to_contain_text("Saved Reader A's voice", timeout=GUARD_MS)
            assert len(list(library.glob("*.json"))) == 1
            expect(page.locator("#library-people label")).to_have_text(["Reader A"], timeout=GUARD_MS)
            assert page.locator("#library-people input").is_checked()

            assert transcribe()[0] == "Reader A"  # the voice saved from this recording names its speaker
            page.locator("summary").click()
            page.locator("#library-people input").uncheck()
            assert transcribe()[0] == "SPEAKER_00"
            page.evaluate("window.scrollTo(0, 0)")
            screenshot(page, "page-voices")
            assert [parameters.get("voices") for parameters in noting.parameters] == [None, None, []]  # all, all, nobody
            page.once("dialog", lambda dialog: dialog.accept())
            page.get_by_role("button", name="Remove Reader A from the voice library").click()
            expect(page.locator("#status")).to_contain_text("Removed Reader A", timeout=GUARD_MS)
            expect(page.locator("#library")).to_be_hidden()
            assert list(library.glob("*.json")) == [] and transcribe()[0] == "SPEAKER_00"
    finally:
        context.close()
    assert problems == []


def refused_upload(page, base_url: str, sent: list[str]) -> str:
    """Choose the sample and press Transcribe: the error the page shows, every POST it made noted in ``sent``."""
    page.on("request", lambda request: sent.append(request.url) if request.method == "POST" else None)
    page.goto(base_url + "/")
    page.set_input_files("#file-input", str(SAMPLE))
    page.get_by_role("button", name="Transcribe").click()
    page.wait_for_selector("#error:not([hidden])", timeout=GUARD_MS)
    return page.inner_text("#error")


def test_a_file_over_the_limit_and_a_full_server_are_explained(browser, real_handler, monkeypatch):
    sent: list[str] = []
    settings = ServerSettings(max_upload_mb=0.1, live_max_sessions=0)
    with serving(create_app(lambda: real_handler, settings), settings) as base_url:
        context = browser.new_context()
        page = context.new_page()
        too_big = refused_upload(page, base_url, sent)
        status_beside_it = page.inner_text("#status")
        page.get_by_role("button", name="Record").click()
        expect(page.locator("#error")).to_contain_text("capacity", timeout=GUARD_MS)
        busy = page.inner_text("#error")
        context.close()
    monkeypatch.setattr(real_handler.settings, "max_audio_seconds", 10.0)
    with serving(create_app(lambda: real_handler, ServerSettings())) as base_url:
        context = browser.new_context()
        too_long = refused_upload(context.new_page(), base_url, sent)
        context.close()
    assert [url for url in sent if "/v1/realtime/calls" not in url] == [], "the page knew the limits: nothing was uploaded"
    assert "too big" in too_big and "MAX_UPLOAD_MB" in too_big and "470 kB" in too_big and "Nothing was sent" in too_big
    assert "too long" in too_long and "0:14" in too_long and "at most 0:10 (MAX_AUDIO_SECONDS)" in too_long
    assert "Uploading" not in status_beside_it  # the status no longer says the upload goes on beside its error
    assert "at capacity" in busy


def test_no_microphone_permission_is_explained(browser, page_url):
    context = browser.new_context()
    page = context.new_page()
    page.add_init_script(path=str(DENY_MICROPHONE))
    page.goto(page_url + "/")
    page.get_by_role("button", name="Record").click()
    page.wait_for_selector("#error:not([hidden])", timeout=GUARD_MS)
    assert "did not allow the microphone" in page.inner_text("#error")
    context.close()


def test_the_api_docs_render_from_this_server_alone(page, page_url):
    """/docs in Chromium: Swagger UI lists the routes, every request the page makes goes to this server
    (FastAPI's default loaded Swagger UI from a CDN, on the origin where the page keeps the key), and its
    policy lets no script run that this server did not send."""
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    response = page.goto(page_url + "/docs")
    assert "script-src 'self';" in response.headers["content-security-policy"]
    expect(page.locator(".opblock-summary-path", has_text="/v1/audio/transcriptions").first).to_be_visible(timeout=GUARD_MS)
    assert requested and all(url.startswith(page_url) for url in requested), [url for url in requested if not url.startswith(page_url)]
    assert not page.problems, page.problems


def test_the_example_app_records_the_microphone_over_webrtc_from_another_origin(browser, real_handler):
    """examples/webrtc-transcription as its README runs it: its backend (another origin, in ALLOWED_ORIGINS)
    mints a secret with the key, its page opens a call with the secret and shows each turn's text."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    origin = f"http://127.0.0.1:{port}"
    settings = ServerSettings(api_key="sk-example", allowed_origins=origin)
    with serving(create_app(lambda: real_handler, settings), settings) as base_url:
        environment = {**os.environ, "SERVER_URL": base_url, "API_KEY": "sk-example", "PORT": str(port)}
        backend = subprocess.Popen([sys.executable, str(ROOT / "examples" / "webrtc-transcription" / "backend.py")], env=environment)
        context = browser.new_context()
        try:
            for _ in range(600):  # up once it answers (the guard turns a backend that never starts into a failure)
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(origin + "/").status_code == 200:
                        break
                time.sleep(0.1)
            page = context.new_page()
            problems: list[str] = []
            page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
            page.goto(origin + "/")
            page.get_by_role("button", name="Start").click()
            expect(page.locator("#status")).to_have_text("listening", timeout=GUARD_MS)
            expect(page.locator("#transcript")).to_contain_text("Dashwood", timeout=GUARD_MS)
            page.get_by_role("button", name="Stop").click()
            assert problems == []
        finally:
            context.close()
            backend.terminate()
            backend.wait(timeout=30)
