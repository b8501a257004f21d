"""The ``ncu`` tool on the H200 (``pytest -m gpu tests/tools/test_gpu_ncu.py -s``): counters of two example
kernels reach the model as a short summary with every named field, within the token budget; or, where the
sandbox's user may not read counters, a clear refusal. Prints the outputs (for the closing note)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from cuda_agent.harness.ncu_profile import count_tokens, ncu_path
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.protocols import ToolContext

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
FIELDS = ("limited by", "SM ", "DRAM ", "L2 ", "L1 ", "occupancy achieved", "registers/thread", "B shared/block")


@pytest.mark.parametrize("name", ["swish", "row_sum"])
def test_ncu_summarises_the_kernels_of_an_example(tmp_path, name):
    import torch

    from cuda_agent.harness.tasks import load_task_file

    if not torch.cuda.is_available() or ncu_path() is None:
        pytest.skip("needs a CUDA GPU and Nsight Compute")
    pm = PluginManager()
    tool = pm.registry.build("tool", "ncu")
    task = load_task_file(REPO / "examples" / "tasks" / f"{name}.py")

    def profile(block: dict, where: str):  # type: ignore[no-untyped-def]
        backend = pm.registry.build("backend", "cuda", block)
        try:
            ws = backend.prepare_workspace(task, tmp_path / where)
            shutil.copytree(REPO / "examples" / "solutions" / "cuda" / name, ws.root, dirs_exist_ok=True)
            started = time.perf_counter()
            out = tool.run(tool.Args(), ToolContext(workspace=ws, task=task, backend=backend, run_dir=tmp_path, turn=1))
        finally:
            backend.close()
        print(f"\n--- ncu on {name}, {where} ({time.perf_counter() - started:.1f} s, {count_tokens(out.content)} "
              f"tokens) ---\n{out.content}")
        return out

    out = profile({}, "sandboxed")
    if out.is_error:  # the sandbox's uid may not read counters: refused clearly; then as the operator would allow
        assert out.content.startswith("ncu refused: ") and "ERR_NVGPUCTRPERM" in out.content, out.content
        out = profile({"harness": {"integrity": {"isolation": "process"}}}, "unsandboxed")
        assert not out.is_error, out.content
    assert f"{name}_kernel" in out.content and all(f in out.content for f in FIELDS), out.content
    assert "top stalls" in out.content and count_tokens(out.content) <= tool.config.max_tokens


def test_ncu_time_on_kernelbench_relu_at_full_size(tmp_path):
    """The measurement behind ``plugins.ncu.time_limit_s``: the tool on KernelBench level1/19_ReLU at full size
    (6.4 GB of input, 6.4 GB written per replay pass) with a 600 s limit; prints the seconds it took."""
    import torch

    from cuda_agent.harness.tasks import load_task_file

    if not torch.cuda.is_available() or ncu_path() is None:
        pytest.skip("needs a CUDA GPU and Nsight Compute")
    problem = REPO / "tests" / "kernelbench" / "data" / "KernelBench" / "level1" / "19_ReLU.py"
    pm = PluginManager()
    tool = pm.registry.build("tool", "ncu", {"time_limit_s": 600})
    backend = pm.registry.build("backend", "cuda")
    if os.environ.get("CUDA_AGENT_NCU_UNSANDBOXED"):  # where the sandbox's uid may not read counters
        backend = pm.registry.build("backend", "cuda", {"harness": {"integrity": {"isolation": "process"}}})
    try:
        task = load_task_file(problem)
        ws = backend.prepare_workspace(task, tmp_path / "ws")
        shutil.copytree(REPO / "examples" / "solutions" / "kernelbench" / "registry" / "cuda" / "19_ReLU", ws.root,
                        dirs_exist_ok=True)
        started = time.perf_counter()
        out = tool.run(tool.Args(), ToolContext(workspace=ws, task=task, backend=backend, run_dir=tmp_path, turn=1))
        seconds = time.perf_counter() - started
    finally:
        backend.close()
    print(f"\n--- ncu on level1/19_ReLU at full size: {seconds:.1f} s (set plugins.ncu.time_limit_s above it) ---\n"
          f"{out.content}")
    assert not out.is_error or "ERR_NVGPUCTRPERM" in out.content, out.content
