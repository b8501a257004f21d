"""Profiler views of one call: the release's profiler-sum time and a per-kernel breakdown.

Run in the candidate runner (the candidate's breakdown, the 'release' preset's time) and in the reference process
(the baselines under the 'release' preset). Reports only: no verdict rests on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def kineto_profile(*, cpu: bool, cuda: bool) -> Any:
    """A Kineto profiler (``torch.autograd.profiler.profile``) recording CPU ops and/or CUDA kernels.

    The profiler ``torch.profiler.profile`` wraps, without the wrapper: its start looks up ``torch._inductor``
    (``prepare_trace`` reads an inductor setting), and that lookup imports inductor and sympy, about 900 modules and
    1.3-1.6 CPU s on a CPU host, in every process that starts a profiler (every candidate runner's op-audit
    warm-up). The events are the same objects (``function_events``, ``key_averages()``).
    """
    from torch.autograd import profiler

    return profiler.profile(use_cpu=cpu, use_device="cuda" if cuda else None, use_kineto=True)


def profiler_sum_ms(fn: Callable[[], Any], device: str, iters: int = 10, warmup: int = 5) -> float:
    """The CUDA-Agent release's method: the profiler's sum of device kernel time / iterations.

    Blind to launch gaps, host work and side streams; kept as a preset for comparison only.
    """
    import torch

    for _ in range(warmup):
        fn()
    is_cuda = device.startswith("cuda")
    if is_cuda:
        torch.cuda.synchronize()
    with kineto_profile(cpu=True, cuda=is_cuda) as prof:
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
    """Per-kernel (CUDA) or per-op (CPU) time of one call via the Kineto profiler, largest first."""
    import torch

    is_cuda = device.startswith("cuda")
    with kineto_profile(cpu=True, cuda=is_cuda) as prof:
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
