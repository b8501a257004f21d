"""The op audit's start costs no torch._dynamo import, and a later lazy import of it is not read as a cheat.

The harness's profilers (the kernel audit, the kernel breakdown, the release's profiler-sum time) import no
torch._inductor either: ``torch.profiler.profile``'s start does, seconds of every runner's start.

Real subprocesses with real torch and the real guard snapshots.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

AUDIT = """
import json, sys, torch
from cuda_agent.harness.integrity import runtime
x = torch.ones(8)
with runtime.audit_ops(kernels=False) as log:
    (x + 1).relu()
print(json.dumps({"dynamo": "torch._dynamo" in sys.modules, "ops": list(log)}))
"""

LAZY_IMPORT = """
import json, torch
from cuda_agent.harness.integrity import runtime
with runtime.audit_ops(kernels=False):
    torch.ones(2).sum()
before = runtime.take_guard_snapshot()
import torch._dynamo  # what some torch APIs do lazily, after the snapshot
after = runtime.take_guard_snapshot()
print(json.dumps([v.rule for v in runtime.compare_guard_snapshot(before, after)]))
"""

PROFILERS = """
import json, sys, torch
from cuda_agent.harness.profiling import kernel_breakdown, profiler_sum_ms
before = "torch._inductor" in sys.modules
x = torch.randn(64, 64)
rows = kernel_breakdown(lambda: torch.mm(x, x).relu(), "cpu")
ms = profiler_sum_ms(lambda: torch.mm(x, x), "cpu", iters=3, warmup=1)
print(json.dumps({"before": before, "after": "torch._inductor" in sys.modules,
                  "names": [r["name"] for r in rows], "ms": ms}))
"""
WRAPPER = """
import json, sys, torch
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU]):
    torch.ones(2).sum()
print(json.dumps("torch._inductor" in sys.modules))
"""


def _run(code: str, env: dict[str, str]) -> object:
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_audit_records_ops_without_importing_dynamo() -> None:
    got = _run(AUDIT, dict(os.environ))
    assert got["dynamo"] is False
    assert got["ops"] == ["aten::add", "aten::relu"]


def test_a_lazy_dynamo_import_after_the_snapshot_is_no_violation() -> None:
    """Some torch APIs import torch._dynamo lazily; the audit's start no longer has, so an honest candidate may be
    the first to. The import sets TORCHINDUCTOR_CACHE_DIR (ignored by the guard) and changes nothing else."""
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    assert _run(LAZY_IMPORT, env) == []


def test_the_harness_profilers_record_without_importing_inductor() -> None:
    got = _run(PROFILERS, dict(os.environ))
    assert got["before"] is False and got["after"] is False, got
    assert "aten::mm" in got["names"], got["names"]
    assert got["ms"] > 0


def test_torch_profiler_wrapper_still_imports_inductor() -> None:
    """Why the harness does not use ``torch.profiler.profile``: if a torch release stops importing inductor at the
    wrapper's start, this fails and ``harness.profiling.kineto_profile`` can go."""
    assert _run(WRAPPER, dict(os.environ)) is True
