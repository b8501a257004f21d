#!/usr/bin/env bash
# Install cuda-agent and run the main job on an embedded default: the swish example task solved by a
# bundled scripted trajectory through real compile, verify, profile and trusted grading.
# Backend: cuda where torch sees a GPU, cpu otherwise. Output: runs/quickstart (override with $1).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/quickstart}
if ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q torch==2.13.0   # the CPU wheel; a GPU machine brings its own CUDA torch
fi
python -m pip install -q -e . -c .ci/constraints.txt
BACKEND=$(python -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
rm -rf "$OUT"
cuda-agent run examples/tasks/swish.py \
  --policy "scripted:examples/trajectories/swish_${BACKEND}.yaml" \
  --backend "$BACKEND" --out "$OUT"
cuda-agent show "$OUT"
