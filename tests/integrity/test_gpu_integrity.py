"""CUDA-side integrity on a real GPU: built modules' symbols, the kernel-origin audit, guards after CUDA init."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_binary, check_sources

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples" / "solutions" / "cuda"
CUDA_WORKSPACES = sorted(p for p in EXAMPLES.glob("*") if (p / "model_new.py").is_file()) if EXAMPLES.is_dir() else []


def _build(src_ws: Path, tmp: Path) -> tuple[Path, Path]:
    from cuda_agent.harness.build import build_extension
    from cuda_agent.harness.layout import binding_sources

    ws = tmp / "ws"
    shutil.copytree(src_ws, ws)
    for rel, text in binding_sources().items():
        (ws / rel).write_text(text)
    outcome = build_extension(ws, "cuda", tmp / "build")
    assert outcome.ok and outcome.so_path is not None, outcome.log
    return ws, outcome.so_path


@pytest.mark.gpu
@pytest.mark.parametrize("workspace", CUDA_WORKSPACES, ids=[p.name for p in CUDA_WORKSPACES])
def test_cuda_example_builds_clean(workspace: Path, tmp_path: Path) -> None:
    ws, so = _build(workspace, tmp_path)
    assert check_sources(ws, "cuda") == []
    assert check_binary(so, "cuda") == []


@pytest.mark.gpu
def test_cuda_stream_cheat_is_caught_in_the_binary(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "kernels").mkdir(parents=True)
    (src / "model_new.py").write_text(
        "import torch\nimport torch.nn as nn\n\nimport cuda_extension\n\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        out = torch.empty_like(x)\n        cuda_extension.side(x, out)\n"
        "        return out\n")
    (src / "kernels" / "side.cu").write_text(
        "#include <cuda_runtime.h>\n__global__ void copy_k(const float* x, float* y, long n) {\n"
        "  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
        "void side_launch(const float* x, float* y, long n) {\n  cudaStream_t s; cudaStreamCreate(&s);\n"
        "  copy_k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);\n}\n")
    (src / "kernels" / "side_binding.cpp").write_text(
        '#include "../binding_registry.h"\nvoid side_launch(const float*, float*, long);\n'
        "void side(const at::Tensor& x, const at::Tensor& y) {\n"
        "  side_launch(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel());\n}\n"
        "REGISTER_BINDING(side, side);\n")
    ws, so = _build(src, tmp_path)
    assert "T9.cpp.stream" in [v.rule for v in check_sources(ws, "cuda")]
    assert [v.rule for v in check_binary(so, "cuda")] == ["T9.binary.stream"]


@pytest.mark.gpu
@pytest.mark.skipif(not (EXAMPLES / "swish").is_dir(), reason="examples/solutions/cuda/swish is not present")
def test_kernel_origin_and_op_audit_on_device(tmp_path: Path) -> None:
    ws, so = _build(EXAMPLES / "swish", tmp_path)
    proc = subprocess.run([sys.executable, str(HERE / "gpu_origin_probe.py"), str(ws), str(so)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["honest_ops"] == [] and result["honest_origin"] == [], result
    assert result["honest_kernels"], "the profiler saw no kernel of the honest extension"
    assert "T1.runtime.aten_compute" in result["cheat_ops"]
    assert "T1.runtime.foreign_kernel" in result["cheat_origin"], result["cheat_kernels"]
    assert result["guard"] == [], result["guard"]
    assert result["inductor_imported"] is False  # the kernel audit's profiler start imports no torch._inductor
