"""Send an audio file to a deployed endpoint (or this repo's server) and print or save the result.

    speaker-transcripts client meeting.wav --url https://xyz.endpoints.huggingface.cloud --format srt num_speakers=2

The file goes base64-encoded in the blog's JSON payload ``{"inputs", "parameters"}`` through
``huggingface_hub.InferenceClient.automatic_speech_recognition`` (``client.post`` no longer
exists); ``--raw`` sends the bytes themselves with an ``audio/*`` content type and the
parameters in the query string (a third smaller upload). ``param=value`` pairs are handler
parameters; values are read as JSON when they parse (``2``, ``true``) and as text otherwise.
The key (``--api-key``/``--token``, else ``HF_TOKEN``, else ``API_KEY``) is sent as ``Authorization:
Bearer``: an endpoint's Hugging Face token, or a self-hosted server's ``API_KEY``. ``--ca-cert``
trusts a server whose certificate a private CA signed (``serve --ssl-certfile`` with your own CA).
"""

from __future__ import annotations

import argparse
import json
import mimetypes
import os
import sys
from pathlib import Path
from typing import Any

from speaker_transcripts.cli import described
from speaker_transcripts.cli.options import add_known_speaker_options, known_speakers_parameter
from speaker_transcripts.output.formats import OUTPUT_FORMATS, render

EXIT_FAILED = 1
EXIT_USAGE = 2


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="speaker-transcripts client", description=described(__doc__))
    parser.add_argument("audio", type=Path, help="the audio file to send")
    parser.add_argument("parameters", nargs="*", metavar="param=value", help="handler parameters, e.g. language=en")
    parser.add_argument("--url", required=True, help="endpoint URL, or http://host:port of a self-hosted server")
    parser.add_argument("--api-key", "--token", dest="token", default=os.environ.get("HF_TOKEN") or os.environ.get("API_KEY"),
                        help="the endpoint's Hugging Face token or the server's API_KEY (default: $HF_TOKEN, else $API_KEY)")
    parser.add_argument("--ca-cert", type=Path, help="trust https:// servers whose certificate this CA (PEM) signed; as SSL_CERT_FILE does")
    parser.add_argument("--diarize", action=argparse.BooleanOptionalAction, help="ask for (or skip) speaker labels")
    add_known_speaker_options(parser)
    parser.add_argument("--format", choices=OUTPUT_FORMATS, default="json")
    parser.add_argument("--out", type=Path, help="write here instead of printing")
    parser.add_argument("--raw", action="store_true", help="send the file's bytes as audio/*, not base64 JSON")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the answer")
    # intermixed: ``param=value`` pairs may come before or after the options, as the docs write them (docs/endpoints.md)
    return parser.parse_intermixed_args(argv)


def parameters_from(pairs: list[str], diarize: bool | None) -> dict[str, Any]:
    parameters: dict[str, Any] = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            raise SystemExit(f"parameters are written name=value, got {pair!r}")
        try:
            parameters[name] = json.loads(value)
        except ValueError:
            parameters[name] = value
    if diarize is not None:
        parameters["diarize"] = diarize
    return parameters


def transport_errors() -> tuple[type[Exception], ...]:
    """What a failed call raises: HTTP errors from either client, refused connections, bad JSON."""
    import httpx
    import httpx2  # huggingface_hub's HTTP client

    return (httpx.HTTPError, httpx2.HTTPError, OSError, RuntimeError, ValueError)


def send_base64(audio: bytes, url: str, token: str | None, parameters: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The blog's payload through InferenceClient (it sends raw bytes when there are no parameters)."""
    from huggingface_hub import InferenceClient

    client = InferenceClient(token=token, timeout=timeout)
    return dict(client.automatic_speech_recognition(audio, model=url, extra_body=parameters))


def send_raw(
    audio: bytes, content_type: str, url: str, token: str | None, parameters: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """The file as the body; parameters (JSON-encoded values) in the query string."""
    import httpx

    headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {token}"} if token else {})}
    query = {name: value if isinstance(value, str) else json.dumps(value) for name, value in parameters.items()}
    response = httpx.post(url, content=audio, params=query, headers=headers, timeout=timeout)
    if response.is_error:
        raise RuntimeError(f"{response.status_code}: {_error_message(response)}")
    return response.json()


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    parameters = parameters_from(arguments.parameters, arguments.diarize)
    known = known_speakers_parameter(arguments)
    if known and arguments.raw:
        print("--speaker clips travel in the JSON request; drop --raw (a query string cannot carry them)", file=sys.stderr)
        return EXIT_USAGE
    if known:
        parameters["known_speakers"] = known
    try:
        audio = arguments.audio.read_bytes()
    except OSError as error:
        print(f"cannot read {arguments.audio}: {error.strerror}", file=sys.stderr)
        return EXIT_FAILED
    if arguments.ca_cert is not None:
        if not arguments.ca_cert.is_file():
            print(f"--ca-cert {arguments.ca_cert}: no such file", file=sys.stderr)
            return EXIT_USAGE
        os.environ["SSL_CERT_FILE"] = str(arguments.ca_cert)  # both HTTP clients read it when they are made
        from huggingface_hub import close_session

        close_session()  # InferenceClient's shared client is made again, reading it
    try:
        if arguments.raw:
            content_type = mimetypes.guess_type(arguments.audio.name)[0] or "application/octet-stream"
            result = send_raw(audio, content_type, arguments.url, arguments.token, parameters, arguments.timeout)
        else:
            result = send_base64(audio, arguments.url, arguments.token, parameters, arguments.timeout)
    except transport_errors() as error:  # one line, no traceback, token-free
        print(f"request failed: {failure_line(error, arguments.token)}", file=sys.stderr)
        return EXIT_FAILED
    document = render(result, arguments.format)
    if arguments.out:
        arguments.out.write_text(document, encoding="utf-8")
    else:
        sys.stdout.write(document)
    return 0


def failure_line(error: Exception, token: str | None) -> str:
    """What went wrong in one line a person can act on: an untrusted certificate says how to trust it,
    an HTTP error its first line (not the client's link to a status code's web page), the key blanked."""
    text = str(error)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        reason = text.split("certificate verify failed:", 1)[-1].split("(_ssl")[0].strip(" :)")
        text = f"the server's certificate is not trusted ({reason}): pass --ca-cert with the CA that signed it, or set SSL_CERT_FILE"
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("For more information")]
    line = " ".join(lines) or type(error).__name__
    return line.replace(token, "***") if token else line


def _error_message(response: Any) -> str:
    try:
        error = response.json().get("error")
    except ValueError:
        return response.text[:500]
    return error.get("message") if isinstance(error, dict) else str(error)

