"""GPU probe (run by test_gpu_integrity.py in a fresh process): audit a real CUDA extension's forward.

Usage: python gpu_origin_probe.py WORKSPACE SO_PATH. Prints JSON: the honest forward's op and kernel
verdicts, then the same for a forward that sneaks in torch.mm and F.gelu, then a guard comparison.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

from cuda_agent.harness.integrity import runtime


def main() -> None:
    workspace, so_path = Path(sys.argv[1]), Path(sys.argv[2])
    torch.cuda.init()
    torch.ones(1, device="cuda").add_(1)
    torch.cuda.synchronize()
    before = runtime.take_guard_snapshot()
    sys.path.insert(0, str(so_path.parent))
    spec = importlib.util.spec_from_file_location("model_new", workspace / "model_new.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew().cuda()
    x = torch.randn(256, 1024, device="cuda")
    with runtime.audit_ops(kernels=True) as honest:
        model(x)
    with runtime.audit_ops(kernels=True) as cheat:
        torch.nn.functional.gelu(torch.mm(x, x.t()))
    torch.cuda.synchronize()
    out = {
        "honest_ops": [v.rule for v in runtime.op_audit_violations(honest, "cuda")],
        "honest_kernels": honest.kernels,
        "honest_origin": [v.rule for v in runtime.kernel_origin_violations(honest.kernels, so_path)],
        "cheat_ops": [v.rule for v in runtime.op_audit_violations(cheat, "cuda")],
        "cheat_kernels": cheat.kernels,
        "cheat_origin": [v.rule for v in runtime.kernel_origin_violations(cheat.kernels, so_path)],
        "guard": [str(v) for v in runtime.compare_guard_snapshot(before, runtime.take_guard_snapshot())],
        "inductor_imported": "torch._inductor" in sys.modules,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
