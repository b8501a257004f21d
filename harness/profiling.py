"""torch.profiler views of one call: the release's profiler-sum time and a per-kernel breakdown.

Run in the candidate runner (the candidate's breakdown, the 'release' preset's time) and in the reference process
(the baselines under the 'release' preset). Reports only: no verdict rests on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def profiler_sum_ms(fn: Callable[[], Any], device: str, iters: int = 10, warmup: int = 5) -> float:
    """The CUDA-Agent release's method: torch.profiler, sum of device kernel time / iterations.

    Blind to launch gaps, host work and side streams; kept as a preset for comparison only.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    is_cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    if is_cuda:
        torch.cuda.synchronize()
    with profile(activities=acts) as prof:
        for _ in range(iters):
            fn()
        if is_cuda:
            torch.cuda.synchronize()
    events = prof.key_averages()
    if is_cuda:
        total_us = sum(getattr(e, "self_device_time_total", 0.0) or 0.0 for e in events)
    else:
        total_us = sum(e.self_cpu_time_total for e in events)
    return total_us / 1e3 / iters


def kernel_breakdown(fn: Callable[[], Any], device: str, top: int = 10) -> list[dict[str, Any]]:
    """Per-kernel (CUDA) or per-op (CPU) time of one call via torch.profiler, largest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    is_cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    with profile(activities=acts) as prof:
        fn()
        if is_cuda:
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        ms = (getattr(e, "self_device_time_total", 0.0) if is_cuda else e.self_cpu_time_total) / 1e3
        if ms > 0:
            rows.append({"name": e.key[:120], "ms": round(ms, 6), "calls": e.count})
    rows.sort(key=lambda r: -r["ms"])
    return rows[:top]
