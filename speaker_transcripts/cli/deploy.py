"""Create or update the Inference Endpoint that runs this repository, in one command.

    speaker-transcripts deploy --name speaker-transcripts --repository YOU/this-repo \
        --assistant-model distil-whisper/distil-large-v3 \
        --diarization-model pyannote/speaker-diarization-community-1

Env vars such as ASR_MODEL can only reach an endpoint through the API (or the UI), so this is the
programmatic path. The token (``--token``, ``HF_TOKEN`` or the stored login) authenticates the call and
reaches the endpoint as the *secret* ``HF_TOKEN``, never as a plain env var. ``--dry-run`` prints the
request ``huggingface_hub`` would send, token redacted. Defaults follow the blog (one A10G on AWS
us-east-1, scale to zero after 15 min). ``HF_INFERENCE_ENDPOINTS_API`` (and ``HF_ENDPOINT``) point it at
another API, e.g. the tests' local stand-in (docs/endpoints.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
from huggingface_hub import HfApi, constants, get_token
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import close_session, set_client_factory
from huggingface_hub.utils._http import (
    default_client_factory,  # no public getter to restore it with
)

from speaker_transcripts.cli import described

REDACTED = "***"
# Inference Endpoints names: lowercase letters, digits and '-', not at either end, at most 32 characters.
ENDPOINT_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")
UNKNOWN_NAMESPACE = "<namespace of the token>"  # shown in a dry run without --namespace (no call asks whose token it is)
API_URL_ENV = "HF_INFERENCE_ENDPOINTS_API"
CONTAINER_PORT = 8080  # the Containerfile's PORT
TERMINAL_FAILURES = {"failed", "updateFailed"}


@dataclass(frozen=True)
class EndpointSpec:
    """Everything the endpoint is created or updated with."""

    name: str
    repository: str
    revision: str | None = None
    namespace: str | None = None
    accelerator: str = "gpu"
    vendor: str = "aws"
    region: str = "us-east-1"
    instance_type: str = "nvidia-a10g"
    instance_size: str = "x1"
    min_replica: int = 0
    max_replica: int = 1
    scale_to_zero_timeout: int | None = 15
    env: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    image: str | None = None  # a container image of this repository's Containerfile (custom container), else the handler

    def create_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``HfApi.create_inference_endpoint``."""
        return {
            "name": self.name,
            "repository": self.repository,
            "revision": self.revision,
            "namespace": self.namespace,
            "framework": "pytorch",
            "task": "custom",
            "accelerator": self.accelerator,
            "vendor": self.vendor,
            "region": self.region,
            "instance_type": self.instance_type,
            "instance_size": self.instance_size,
            "min_replica": self.min_replica,
            "max_replica": self.max_replica,
            "scale_to_zero_timeout": self.scale_to_zero_timeout,
            "env": self.env or None,
            "secrets": self.secrets or None,
            # the image serves on CONTAINER_PORT and answers GET /health once its models are loaded
            "custom_image": {"url": self.image, "port": CONTAINER_PORT, "healthRoute": "/health"} if self.image else None,
        }

    def update_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``HfApi.update_inference_endpoint`` (where you deploy, not what, is fixed)."""
        arguments = self.create_arguments()
        for fixed in ("vendor", "region"):
            del arguments[fixed]
        return arguments


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="speaker-transcripts deploy", description=described(__doc__))
    parser.add_argument(
        "--name", required=True, type=endpoint_name, help="endpoint name (lowercase letters, digits, '-'; at most 32)"
    )
    parser.add_argument("--repository", required=True, help="the Hub repository holding this handler (OWNER/REPO)")
    parser.add_argument("--revision", help="branch, tag or commit of the repository")
    parser.add_argument("--namespace", help="user or organisation owning the endpoint (default: the token's user)")
    parser.add_argument(
        "--image", help="run this image of the repository's Containerfile (custom container, port 8080, /health) instead of the handler",
    )
    parser.add_argument("--asr-model", help="ASR_MODEL (default: the handler's, openai/whisper-large-v3)")
    parser.add_argument("--assistant-model", help="ASSISTANT_MODEL for speculative decoding")
    parser.add_argument("--diarization-model", help="DIARIZATION_MODEL, e.g. pyannote/speaker-diarization-community-1")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="any other env var (repeatable)")
    parser.add_argument("--accelerator", default="gpu", choices=["gpu", "cpu"])
    parser.add_argument("--vendor", default="aws")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--instance-type", default="nvidia-a10g")
    parser.add_argument("--instance-size", default="x1")
    parser.add_argument("--min-replica", type=int, default=0, help="0 lets the endpoint scale to zero")
    parser.add_argument("--max-replica", type=int, default=1)
    parser.add_argument("--scale-to-zero-timeout", type=int, default=15, help="idle minutes before scaling to zero")
    parser.add_argument("--token", help="Hugging Face token (default: HF_TOKEN, then the stored login)")
    parser.add_argument("--dry-run", action="store_true", help="print the request, token redacted; send nothing")
    parser.add_argument("--no-wait", action="store_true", help="return once the request is accepted")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for 'running'")
    parser.add_argument("--poll", type=float, default=10, help="seconds between status checks")
    return parser.parse_args(argv)


def endpoint_name(value: str) -> str:
    """An endpoint name Inference Endpoints accepts; anything else fails here, before any call."""
    if not ENDPOINT_NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a valid endpoint name: use 1-32 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


def spec_from_arguments(arguments: argparse.Namespace, token: str | None) -> EndpointSpec:
    env = {}
    for item in arguments.env:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise SystemExit(f"--env expects KEY=VALUE, got {item!r}")
        if key == "HF_TOKEN":
            raise SystemExit("HF_TOKEN is passed as a secret from --token/HF_TOKEN; don't put it in --env")
        env[key] = value
    models = {
        "ASR_MODEL": arguments.asr_model,
        "ASSISTANT_MODEL": arguments.assistant_model,
        "DIARIZATION_MODEL": arguments.diarization_model,
    }
    env.update({key: value for key, value in models.items() if value})
    return EndpointSpec(
        name=arguments.name,
        repository=arguments.repository,
        revision=arguments.revision,
        namespace=arguments.namespace,
        accelerator=arguments.accelerator,
        vendor=arguments.vendor,
        region=arguments.region,
        instance_type=arguments.instance_type,
        instance_size=arguments.instance_size,
        min_replica=arguments.min_replica,
        max_replica=arguments.max_replica,
        scale_to_zero_timeout=arguments.scale_to_zero_timeout if arguments.min_replica == 0 else None,
        env=env,
        secrets={"HF_TOKEN": token} if token else {},
        image=arguments.image,
    )


def redacted(value: Any, secrets: set[str]) -> Any:
    """``value`` with every secret string replaced, however deep it sits."""
    if isinstance(value, dict):
        return {key: redacted(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item, secrets) for item in value]
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
    return value


def dry_run(api: HfApi, spec: EndpointSpec, token: str | None) -> dict[str, Any]:
    """Run ``create_inference_endpoint`` against a recorder instead of the network; return the
    request it made (method, URL, headers, JSON body), secrets redacted."""
    recorded: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        recorded.append(request)
        payload = json.loads(request.content or b"{}")
        echo = {**payload, "status": {"state": "pending", "createdAt": "2000-01-01T00:00:00Z", "updatedAt": "2000-01-01T00:00:00Z"},
                "healthRoute": "/health"}
        return httpx2.Response(200, json=echo)

    set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(record)))
    close_session()
    try:
        arguments = spec.create_arguments()
        arguments["namespace"] = spec.namespace or "namespace-of-the-token"
        api.create_inference_endpoint(**arguments, token=token or False)
    finally:
        set_client_factory(default_client_factory)
        close_session()
    request = recorded[-1]
    secrets = {token} if token else set()
    return redacted(
        {
            "method": request.method,
            "url": str(request.url).replace("namespace-of-the-token", UNKNOWN_NAMESPACE),
            "headers": {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")},
            "json": json.loads(request.content),
        },
        secrets,
    )


def deploy(api: HfApi, spec: EndpointSpec, token: str | None) -> Any:
    """Update the endpoint if it exists, otherwise create it; returns the ``InferenceEndpoint``."""
    try:
        api.get_inference_endpoint(spec.name, namespace=spec.namespace, token=token)
    except HfHubHTTPError as error:
        if error.response is None or error.response.status_code != 404:
            raise
        print(f"creating endpoint {spec.name} ({spec.instance_type} {spec.instance_size}, {spec.vendor} {spec.region})")
        return api.create_inference_endpoint(**spec.create_arguments(), token=token)
    print(f"endpoint {spec.name} exists: updating it")
    return api.update_inference_endpoint(**spec.update_arguments(), token=token)


def wait_until_running(endpoint: Any, timeout_s: float, poll_s: float) -> None:
    """Print each status change with the time it took; fail clearly on a failed deployment."""
    started = time.monotonic()
    last_status = None
    while True:
        if endpoint.status != last_status:
            print(f"[{time.monotonic() - started:6.0f} s] {endpoint.name}: {endpoint.status}", flush=True)
            last_status = endpoint.status
        if endpoint.status == "running":
            print(f"ready: {endpoint.url}")
            return
        if endpoint.status in TERMINAL_FAILURES:
            message = endpoint.raw.get("status", {}).get("message") or "no reason given"
            raise SystemExit(f"deployment failed ({endpoint.status}): {message}; the endpoint's logs in the UI say more")
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"still '{endpoint.status}' after {timeout_s:g} s; check the endpoint in the UI")
        time.sleep(poll_s)
        endpoint.fetch()


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if os.environ.get(API_URL_ENV):
        constants.INFERENCE_ENDPOINTS_ENDPOINT = os.environ[API_URL_ENV].rstrip("/")
    token = arguments.token or get_token()
    spec = spec_from_arguments(arguments, token)
    api = HfApi()
    if arguments.dry_run:
        print(json.dumps(dry_run(api, spec, token), indent=2))
        return 0
    if not token:
        raise SystemExit("no Hugging Face token: pass --token, set HF_TOKEN or run `huggingface-cli login`")
    try:
        endpoint = deploy(api, spec, token)
        if not arguments.no_wait:
            wait_until_running(endpoint, arguments.timeout, arguments.poll)
    except HfHubHTTPError as error:
        raise SystemExit(f"the Inference Endpoints API refused the request: {redacted(str(error), {token})}") from None
    except unreachable_errors() as error:  # no network, DNS, proxy: one line, not a 60-line traceback
        reason = redacted(str(error), {token}) or type(error).__name__
        raise SystemExit(f"could not reach the Inference Endpoints API ({reason}); check the network (and HF_INFERENCE_ENDPOINTS_API, when set)") from None
    return 0


def unreachable_errors() -> tuple[type[Exception], ...]:
    """What huggingface_hub raises when the API cannot be reached at all (its HTTP clients' transport errors)."""
    import httpx
    import httpx2

    return (httpx.TransportError, httpx2.TransportError, OSError)

