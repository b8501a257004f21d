"""The sandbox side of the Triton backend, the parts that need no sandbox: which GPU kernels count as the
candidate's (the workspace's @triton.jit functions, torch's fill/copy kernels) and the interpreter's shim."""

from __future__ import annotations

import subprocess
import sys

from triton_cheats import HONEST

from triton_backend.runner import TritonLoader


def test_only_the_workspace_kernels_and_torch_memory_kernels_may_run(tmp_path):
    (tmp_path / "model_new.py").write_text(HONEST)
    ran = ["swish_kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
           "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32", "void at::native::reduce_kernel<512, 1>(float)",
           "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32"]
    found = TritonLoader().kernel_origin_violations(ran, tmp_path, None)
    assert [v.rule for v in found] == ["T1.runtime.foreign_kernel"] * 2  # each foreign kernel once
    assert "sm90_xmma_gemm" in found[0].message and "at::native::reduce_kernel" in found[1].message
    assert "swish_kernel" in found[0].message  # names what would have been allowed


def test_the_loader_makes_triton_ready_on_the_cpu_in_its_own_process(tmp_path):
    code = ("import os; from pathlib import Path; from triton_backend.runner import TritonLoader; "
            "TritonLoader().prepare('cpu'); "
            "print(os.environ['TRITON_INTERPRET'], Path(os.environ['TRITON_CACHE_DIR']).parent == Path.cwd())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "True"]  # interpreter on, a private cache beside the runner
