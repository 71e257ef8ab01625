#!/usr/bin/env bash
# The contract tier's image, built from peagle's own container template and pushed to your account's ECR
# (SageMaker pulls hosting images from ECR only):
#
#   bash tests/contract/build_image.sh ACCOUNT_ID REGION [REPOSITORY]
#
# 1. a wheel of this checkout and `peagle container dockerfile --base <python slim>` (the shipped Dockerfile:
#    peagle's entrypoint, installed --no-deps), built as peagle-vllm-minimal;
# 2. tests/contract/Dockerfile on top of it (peagle's vLLM stand-in as `vllm`), built as peagle-contract;
# 3. the ECR repository (default peagle-contract) created if missing, the image pushed; the last line is the
#    `export PEAGLE_AWS_IMAGE=...` to run the tier with.
# Needs docker (or `alias docker=podman`), the AWS CLI allowed ecr:CreateRepository, ecr:GetAuthorizationToken and
# the push actions, and this checkout's .venv (python3 -m venv .venv && .venv/bin/pip install -e '.[test]').
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bash tests/contract/build_image.sh ACCOUNT_ID REGION [REPOSITORY]" >&2
  exit 2
fi
account="$1" region="$2" repository="${3:-peagle-contract}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$root/build/contract-image"
base="public.ecr.aws/docker/library/python:3.12-slim"
rm -rf "$build" && mkdir -p "$build/dist"
"$root/.venv/bin/pip" wheel -q --no-deps -w "$build/dist" "$root"
"$root/.venv/bin/peagle" container dockerfile --output "$build/context" --base "$base" \
  --wheel "$(ls "$build"/dist/peagle_deploy-*.whl)"
docker build -t peagle-vllm-minimal:latest "$build/context"
docker build -t peagle-contract:latest -f "$root/tests/contract/Dockerfile" "$build/context"
host="$account.dkr.ecr.$region.amazonaws.com"
version="$("$root/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("peagle-deploy"))')"
image="$host/$repository:$version-$(date -u +%Y%m%d%H%M%S)"
aws ecr describe-repositories --region "$region" --repository-names "$repository" >/dev/null 2>&1 \
  || aws ecr create-repository --region "$region" --repository-name "$repository" >/dev/null
aws ecr get-login-password --region "$region" | docker login --username AWS --password-stdin "$host"
docker tag peagle-contract:latest "$image"
docker push "$image"
echo "export PEAGLE_AWS_IMAGE=$image"
