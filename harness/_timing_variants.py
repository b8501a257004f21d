"""Diagnostics: one reference process's eager baseline timed several ways, inside that very process.

Issue 4's open spread: row_sum's eager baseline took one of two discrete levels (17.95 / 18.85 us on the H200)
per evaluator reference process, while probe processes built to look like one showed a single level. Timing the
same model in the same process under variants of the protocol tells apart what the level follows:

- ``standard``: what :meth:`ReferenceServer.time_baseline` does (rotated sets, a clone per call, write flush);
- ``rotated_buffers``: the clone goes to one of several destinations allocated now, in turn (where the input lies);
- ``fresh_timer``: a new :class:`DeviceTimer` (a new flush buffer);
- ``flush_read`` / ``no_flush``: the L2 left holding clean lines / not flushed (the flush's dirty lines' write-back);
- ``no_preroll``: no device spin before the call (host launch latency shows);
- ``direct_op``: the model's forward without ``nn.Module.__call__`` (hooks, dispatch);
- ``null``: one element written (the protocol's own cost); ``copy``: the input's clone itself (memory bandwidth).

Each entry: median, fastest call and IQR in ms. Called by ``benchmarks/eval_throughput.py --diagnose TASKS``
under the device's timing lock, never by grading.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

#: Destinations of the ``rotated_buffers`` variant.
ROTATED_BUFFERS = 4
#: Input sets made for the diagnostics when none is named (as many as a graded baseline rotates over).
DIAGNOSTIC_SETS = 5
#: Their seeds: DIAGNOSTIC_SEED + k (public: nothing secret is timed here).
DIAGNOSTIC_SEED = 9000


def _stats(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "iqr_ms": q[2] - q[0]}


def _clocks(index: int) -> dict[str, int] | None:
    """The GPU's SM and memory clocks now (NVML), None where NVML is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {"sm": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "mem": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)}
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


def timing_variants(server: Any, sets: list[int] | None = None, calls: int = 100) -> dict[str, Any]:
    """The eager model of ``server`` (a :class:`~cuda_agent.harness.reference.ReferenceServer`) timed per variant,
    over the process's input sets ``sets``, or (None) :data:`DIAGNOSTIC_SETS` sets made now."""
    torch = server.torch
    from cuda_agent.harness.timing import DeviceTimer

    from cuda_agent.harness.reference import generate_inputs

    if sets is None:  # a session's sets are dropped once it is graded: sets of this process's own, from public seeds
        input_sets = [generate_inputs(torch, server.module.get_inputs, DIAGNOSTIC_SEED + k, server.device)
                      for k in range(DIAGNOSTIC_SETS)]
    elif not sets or any(k not in server.sets for k in sets):
        raise ValueError(f"sets {sets} are not all made in this process (made: {sorted(server.sets)})")
    else:
        input_sets = [server.sets[k]["inputs"] for k in sets]
    if calls < 2:
        raise ValueError(f"calls must be at least 2, got {calls}")
    device = str(server.device)
    base = server.timer or DeviceTimer(device)
    server.timer = base
    model = server.model
    forward = getattr(model, "forward", model)

    def inputs(j: int) -> list[Any]:
        return input_sets[j % len(input_sets)]

    def clones(j: int) -> list[Any]:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs(j)]

    def run(timer: Any, make_args: Any, fn: Any, flush: bool = True) -> dict[str, float]:
        samples = []
        with torch.no_grad():
            for j in range(calls + 3):
                args = make_args(j)
                _, ms, _ = timer.time_call(lambda: fn(*args), flush=flush)
                if j >= 3:
                    samples.append(ms)
        return _stats(samples)

    dests = [[torch.empty_like(x) if isinstance(x, torch.Tensor) else x for x in inputs(0)]
             for _ in range(ROTATED_BUFFERS)]

    def rotated(j: int) -> list[Any]:
        out = dests[j % len(dests)]
        for d, x in zip(out, inputs(j)):
            if isinstance(x, torch.Tensor):
                d.copy_(x)
        return out

    read_timer = DeviceTimer(device, flush_mode="read", preroll_us=base.preroll_us)
    null = torch.empty(1, device=server.device)
    first = next((x for x in inputs(0) if isinstance(x, torch.Tensor)), None)
    out: dict[str, Any] = {
        "standard": run(base, clones, model),
        "rotated_buffers": run(base, rotated, model),
        "fresh_timer": run(DeviceTimer(device, preroll_us=base.preroll_us), clones, model),
        "flush_read": run(read_timer, clones, model),
        "no_flush": run(base, clones, model, flush=False),
        "no_preroll": run(DeviceTimer(device, preroll_us=0.0), clones, model),
        "direct_op": run(base, clones, forward),
        "null": run(base, lambda j: [], lambda: null.fill_(1.0)),
    }
    if first is not None:
        out["copy"] = run(base, lambda j: [first], lambda x: x.clone())
    info: dict[str, Any] = {"pid": os.getpid(), "preroll_us": base.preroll_us, "calls": calls}
    if server.device.type == "cuda":
        info["flush_buf_ptr"] = base.flush_buf.data_ptr()
        info["input_ptrs"] = [x.data_ptr() for x in inputs(0) if isinstance(x, torch.Tensor)]
        info["reserved_bytes"] = torch.cuda.memory_reserved(server.device)
        info["allocated_bytes"] = torch.cuda.memory_allocated(server.device)
        info["clocks_mhz"] = _clocks(server.device.index or 0)
    try:
        info["cpus"] = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    out["info"] = info
    return out
