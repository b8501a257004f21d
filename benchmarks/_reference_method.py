"""The reference agent environment's per-turn method (ANCHORS.md), re-implemented for comparison.

Each step runs as its own fresh process, as the CUDA-Agent release's scripts do:

- ``compile``: delete the build folder, rebuild ``binding.cpp`` + ``kernels/*`` with
  ``torch.utils.cpp_extension.load`` (no reuse of anything);
- ``verify``: 5 input sets built by ``get_inputs()`` on the CPU and copied to the device,
  candidate vs reference, atol = rtol = 1e-2;
- ``profile``: ``torch.compile`` of the reference, then 5 warm-up + 10 profiled iterations of
  candidate, eager and compiled reference, device kernel time summed by ``torch.profiler``.

Usage: ``python _reference_method.py {compile|verify|profile} WORKSPACE BUILD_DIR DEVICE``.
Prints one JSON line with the step's own figures. Written from ANCHORS.md's description only.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _extension(ws: Path, build: Path, device: str, fresh: bool):
    from torch.utils.cpp_extension import load

    if fresh and build.exists():
        shutil.rmtree(build)
    build.mkdir(parents=True, exist_ok=True)
    sources = [str(ws / "binding.cpp")] + sorted(str(p) for p in (ws / "kernels").iterdir() if p.suffix in {".cu", ".cpp"})
    flags = ["-O3"] + (["-fopenmp"] if device == "cpu" else [])
    return load(
        name="cuda_extension",
        sources=sources,
        build_directory=str(build),
        extra_include_paths=[str(ws)],
        extra_cflags=flags,
        extra_ldflags=["-fopenmp"] if device == "cpu" else [],
        extra_cuda_cflags=["-O3"],
        verbose=False,
    )


def main() -> None:
    step, ws, build, device = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    started = time.perf_counter()
    import torch

    if step == "compile":
        _extension(ws, build, device, fresh=True)
        print(json.dumps({"step": step, "seconds": time.perf_counter() - started}))
        return
    ext = _extension(ws, build, device, fresh=False)
    sys.modules["cuda_extension"] = ext
    ref_mod = _load(ws / "model.py", "ref_model")
    new_mod = _load(ws / "model_new.py", "new_model")
    init = ref_mod.get_init_inputs()
    torch.manual_seed(42)
    ref = ref_mod.Model(*init).to(device)
    torch.manual_seed(42)
    new = new_mod.ModelNew(*init).to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    if step == "verify":
        ok = True
        with torch.no_grad():
            for seed in range(5):
                torch.manual_seed(seed)
                inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
                a, b = ref(*inputs), new(*inputs)
                sync()
                ok = ok and torch.allclose(a, b, atol=1e-2, rtol=1e-2)
        print(json.dumps({"step": step, "correct": bool(ok), "seconds": time.perf_counter() - started}))
        return
    # profile
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
    compiled = torch.compile(ref)
    from torch.profiler import ProfilerActivity, profile

    activity = ProfilerActivity.CUDA if device.startswith("cuda") else ProfilerActivity.CPU
    result = {}
    with torch.no_grad():
        for label, fn in (("candidate", new), ("eager", ref), ("compile", compiled)):
            for _ in range(5):
                fn(*inputs)
            sync()
            with profile(activities=[activity]) as prof:
                for _ in range(10):
                    fn(*inputs)
                sync()
            events = prof.key_averages()
            if device.startswith("cuda"):
                total_us = sum(getattr(e, "self_device_time_total", 0.0) for e in events)
            else:
                total_us = sum(e.self_cpu_time_total for e in events)
            result[label] = total_us / 10 / 1000.0
    print(json.dumps({"step": step, "ms": result, "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
