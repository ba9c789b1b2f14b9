#!/usr/bin/env bash
# Start the image, wait for /health, transcribe the sample through the Endpoints payload, stop it.
#
#   deploy/container/check.sh [TAG]
#
# Prints the transcript's speaker lines and how long each step took; exits non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
tag="${1:-speaker-transcripts:latest}"
podman=(podman --runtime runc)
port="${CHECK_PORT:-18080}"
name="speaker-transcripts-check-$$"
started=$(date +%s)
"${podman[@]}" run -d --rm --name "$name" --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
  -p "127.0.0.1:$port:8080" "$tag" >/dev/null
trap '"${podman[@]}" stop -t 5 "$name" >/dev/null 2>&1 || true' EXIT
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
  if ! "${podman[@]}" container exists "$name"; then
    echo "check: the container exited before it was healthy" >&2
    exit 1
  fi
  if [ $(( $(date +%s) - started )) -gt 300 ]; then
    echo "check: not healthy within 300 s" >&2
    "${podman[@]}" logs "$name" | tail -20 >&2
    exit 1
  fi
  sleep 1
done
healthy=$(date +%s)
echo "check: healthy after $((healthy - started)) s" >&2
{ printf '{"inputs": "'; base64 -w0 samples/two-readers.wav; printf '", "parameters": {"language": "en"}}'; } \
  | curl -sf "http://127.0.0.1:$port/" -H "Content-Type: application/json" --data-binary @- \
  | python3 -c 'import json, sys; [print(segment["speaker"] + ": " + segment["text"]) for segment in json.load(sys.stdin)["speakers"]]'
echo "check: transcribed in $(( $(date +%s) - healthy )) s" >&2
