#!/usr/bin/env bash
# Build the image where no container registry is reachable (Debian's package archive and PyPI are enough):
# a debian:bookworm-slim base made with debootstrap and imported into podman, then the Containerfile.
#
#   deploy/container/build-local.sh [TAG] [more options of the build]     e.g. --build-arg TORCH=cpu
#
# Needs podman, runc and debootstrap (apt-get install podman runc debootstrap) and root. This machine's CA
# bundle is mounted into the build for pip (PIP_CERT), never copied into the image. Sandboxes that refuse
# podman's default limits and runtime get them here: --runtime runc, nofile/nproc 1024.
set -euo pipefail
cd "$(dirname "$0")/../.."
tag="${1:-speaker-transcripts:latest}"
shift || true
podman=(podman --runtime runc)
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

if ! "${podman[@]}" image exists debian:bookworm-slim; then
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' EXIT
  echo "build-local: making debian:bookworm-slim with debootstrap (a few minutes)" >&2
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
  tar -C "$root" -c . | "${podman[@]}" import - debian:bookworm-slim >/dev/null
fi

ca="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
mount=()
certificate=()
if [ -f "$ca" ]; then
  mount=(-v "$ca:/run/host-ca.crt:ro")
  certificate=(--build-arg PIP_CERT=/run/host-ca.crt)
fi
echo "build-local: building $tag" >&2
"${podman[@]}" build --format docker --build-arg BASE=debian:bookworm-slim --network host "${limits[@]}" "${mount[@]}" "${certificate[@]}" -t "$tag" -f Containerfile "$@" .
"${podman[@]}" image ls "$tag"
