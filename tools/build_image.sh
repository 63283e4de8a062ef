#!/usr/bin/env bash
# Builds the image the JobSet runs (Containerfile) with podman, on a machine that can reach
# no container registry: the base is made from Debian's packages.
#
#   bash tools/build_image.sh [IMAGE]        (default localhost/slim-deploy:latest)
#
# BASE=IMAGE uses that base instead (docker.io/library/python:3.11-slim-bookworm where a
# registry is reachable); by default localhost/slim-deploy-base:bookworm, made once with
# mmdebstrap (Debian bookworm, minbase, python3, python3-venv, ca-certificates) and
# `podman import`. pip's settings pass through as build arguments (PIP_INDEX_URL,
# PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST, from the environment), and its CA bundle
# (PIP_CERT, else pip's configured `cert`) as a build secret, never stored in the image.
# The build keeps no intermediate layers, and removes the image IMAGE named before unless
# another name or a container uses it: rebuilding leaves one image, not one per build.
# Needs root or rootless podman, and mmdebstrap for the default base. Prints the image's
# name and size.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${1:-localhost/slim-deploy:latest}
DEFAULT_BASE=localhost/slim-deploy-base:bookworm
BASE=${BASE:-$DEFAULT_BASE}

for tool in podman $([ "$BASE" = "$DEFAULT_BASE" ] && echo mmdebstrap); do
    command -v "$tool" >/dev/null || {
        echo "build_image.sh: error: $tool is missing (apt install $tool)" >&2; exit 2; }
done

if [ "$BASE" = "$DEFAULT_BASE" ] && ! podman image exists "$BASE"; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$work/rootfs.tar"
    podman import --quiet "$work/rootfs.tar" "$BASE" >/dev/null
fi

args=(--isolation chroot --layers=false --file Containerfile --tag "$IMAGE" --build-arg "BASE=$BASE")
for setting in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST; do
    [ -n "${!setting:-}" ] && args+=(--build-arg "$setting=${!setting}")
done
cert=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
if [ -n "$cert" ]; then
    args+=(--secret "id=pip_cert,src=$cert" --build-arg PIP_CERT=/run/secrets/pip_cert)
fi
replaced=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
podman --log-level error build --quiet "${args[@]}" . >/dev/null
read -r built size < <(podman image inspect --format '{{.Id}} {{.Size}}' "$IMAGE")
# The image this build replaced goes unless it still has a name or a container.
if [ -n "$replaced" ] && [ "$replaced" != "$built" ]; then
    podman rmi "$replaced" >/dev/null 2>&1 || true
fi
echo "$IMAGE $(numfmt --to=si "$size")B"
