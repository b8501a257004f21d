"""One step of the reference method (ANCHORS.md: the CUDA-Agent release's per-turn scripts), as a fresh process.

Re-implemented from the description in ANCHORS.md (no release code): every
step is its own Python process; inputs are built by ``get_inputs()`` on the
CPU and copied to the GPU; the extension is rebuilt from scratch with
``torch.utils.cpp_extension``; profiling torch.compiles the reference anew
and sums profiler kernel time over 10 iterations after 5 warm-ups.

usage: python _reference_turn.py {compile|verify|profile} WORKSPACE BUILD_DIR
Prints one JSON line with the step's findings.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _load_task(workspace: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("reference_model", workspace / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_candidate(workspace: Path, build_dir: Path):
    sys.path.insert(0, str(build_dir))
    sys.path.insert(0, str(workspace))
    import model_new  # noqa: F401  (imports cuda_extension from build_dir)

    return model_new


def step_compile(workspace: Path, build_dir: Path) -> dict:
    from torch.utils.cpp_extension import load

    shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True)
    sources = [workspace / "binding.cpp"] + sorted((workspace / "kernels").glob("*.cu")) + sorted(
        (workspace / "kernels").glob("*_binding.cpp"))
    t0 = time.perf_counter()
    load(name="cuda_extension", sources=[str(s) for s in sources], build_directory=str(build_dir),
         extra_cflags=["-O3"], extra_cuda_cflags=["-O3"], verbose=False)
    return {"step": "compile", "build_s": time.perf_counter() - t0}


def step_verify(workspace: Path, build_dir: Path, trials: int = 5) -> dict:
    import torch

    task = _load_task(workspace)
    cand = _load_candidate(workspace, build_dir)
    init = task.get_init_inputs()
    torch.manual_seed(42)
    ref = task.Model(*init).cuda()
    torch.manual_seed(42)
    new = cand.ModelNew(*init).cuda()
    ok = True
    for trial in range(trials):
        torch.manual_seed(1000 + trial)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]  # built on the CPU
        with torch.no_grad():
            expected = ref(*inputs)
            got = new(*inputs)
        torch.cuda.synchronize()
        ok = ok and bool(torch.allclose(got, expected, atol=1e-2, rtol=1e-2))
    return {"step": "verify", "correct": ok}


def _profiled_ms(fn, inputs, warmup: int = 5, iters: int = 10) -> float:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(warmup):
            fn(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn(*inputs)
            torch.cuda.synchronize()
    total_us = sum(e.self_device_time_total for e in prof.key_averages())
    return total_us / 1000.0 / iters


def step_profile(workspace: Path, build_dir: Path) -> dict:
    import torch

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")  # compile per profile, no cache
    task = _load_task(workspace)
    cand = _load_candidate(workspace, build_dir)
    init = task.get_init_inputs()
    torch.manual_seed(42)
    ref = task.Model(*init).cuda()
    torch.manual_seed(42)
    new = cand.ModelNew(*init).cuda()
    compiled = torch.compile(ref)
    torch.manual_seed(0)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    return {"step": "profile", "candidate_ms": _profiled_ms(new, inputs), "eager_ms": _profiled_ms(ref, inputs),
            "compile_ms": _profiled_ms(compiled, inputs)}


if __name__ == "__main__":
    step, ws, build = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    fn = {"compile": step_compile, "verify": step_verify, "profile": step_profile}[step]
    print(json.dumps(fn(ws, build)))
