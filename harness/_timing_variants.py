"""Diagnostics: one reference process's eager baseline timed several ways, inside that very process.

Issue 4's open spread: row_sum's eager baseline took one of two discrete levels (17.95 / 18.85 us on the H200)
in the evaluator's reference processes. Timing it in the same process under variants of the protocol (H200,
2026-12-01, first version of this module) showed the level is not the process's: it flips inside one process
when either the flush buffer or the input sets are allocated anew, with a write and a read flush alike, and not
without a flush. So it follows how the flush buffer and the data lie relative to each other.

Here every variant is timed over ``placements`` placements (new input sets and new timers, so new flush buffers,
each), and reported per placement: a protocol whose per-placement medians agree is placement-proof.

- ``standard``: what :meth:`ReferenceServer.time_baseline` does (rotated sets, the process's clone setting, its
  flush: ``HarnessSettings.timing_l2_flush_multiple`` times the L2, written, and its
  ``timing_warm_input_pages``);
- ``write_2x`` / ``write_4x`` / ``write_8x``: a written flush buffer of 2, 4 or 8 times the L2 (is 2x not enough
  to evict every line of the data?);
- ``read_2x`` / ``read_4x``: the same buffer read (clean lines left);
- ``touch_2x``: the 2x write flush, then one byte of every 2 MiB page of the inputs read
  (:func:`~cuda_agent.harness.timing.warm_input_pages`: the data's address translations warm, almost none of its
  lines cached: is it the TLB?); every other variant but ``standard`` without that;
- ``direct`` / ``direct_warm``: the 2x write flush on the set's own tensors, no clone per call (without / with the
  pages warmed);
- ``graded``: :meth:`ReferenceServer.time_baseline` itself on this placement's sets (the graded code path, with
  the process's settings: ``baseline_clone_inputs``, ``timing_warm_input_pages``, its own timer);
- ``spin_500`` / ``spin_1000``: the process's protocol with a 500 / 1000 us pre-roll spin and no retakes (does a
  longer spin steady a compiled model's time under load? its host path may outlast the 200 us default);
- ``no_retakes``: the process's protocol without ``timing_preroll_retakes`` (every other variant has the
  process's retakes);
- ``null`` and ``copy`` (once): one element written (the protocol's own cost); the input's clone itself.

Measured on the H200 (2026-12-01): the slow level came back in about one placement of three with every flush
size and kind; ``touch_2x`` was free of it in one run (41 of 42 placements) and not in the next (where the process
itself warmed pages and ``standard`` and ``graded`` showed both levels too); ``direct_warm`` gave 17.98-18.32 us in
all 18 placements, ``direct`` 17.84-18.85 us: writing the inputs just before the flush is what brings the slow
level, hence ``HarnessSettings.baseline_clone_inputs`` false by default.

Each entry: per-placement medians (ms), their spread, fastest call and IQR. Called by
``benchmarks/eval_throughput.py --diagnose TASKS`` under the device's timing lock, never by grading.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

#: Input sets made per placement (as many as a graded baseline rotates over).
DIAGNOSTIC_SETS = 5
#: Their seeds: DIAGNOSTIC_SEED + 100 * placement + k (public: nothing secret is timed here).
DIAGNOSTIC_SEED = 9000
#: Variant name -> (flush size in L2 multiples, flush mode, clone per call, warm the inputs' pages after the
#: flush, pre-roll spin in us, retakes of a call that outlasted its spin); None = the process's own setting.
VARIANTS: dict[str, tuple[float | None, str | None, bool | None, bool | None, float | None, int | None]] = {
    "standard": (None, None, None, None, None, None),
    "write_2x": (2.0, "write", True, False, None, None),
    "write_4x": (4.0, "write", True, False, None, None),
    "write_8x": (8.0, "write", True, False, None, None),
    "read_2x": (2.0, "read", True, False, None, None),
    "read_4x": (4.0, "read", True, False, None, None),
    "touch_2x": (2.0, "write", True, True, None, None),
    "direct": (2.0, "write", False, False, None, None),
    "direct_warm": (2.0, "write", False, True, None, None),
    "spin_500": (None, None, None, None, 500.0, 0),
    "spin_1000": (None, None, None, None, 1000.0, 0),
    "no_retakes": (None, None, None, None, None, 0),
}
#: Baseline kinds :func:`timing_variants` times.
KINDS = ("eager", "compile")


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


def timing_variants(server: Any, sets: list[int] | None = None, calls: int = 100, placements: int = 3,
                    which: str = "eager") -> dict[str, Any]:
    """The eager model of ``server`` (a :class:`~cuda_agent.harness.reference.ReferenceServer`), or with ``which``
    'compile' its ``torch.compile`` wrapper, timed per variant and placement. ``sets``: the process's own input sets
    for the first placement (default: sets made here, as for every later placement). Every entry also counts the
    calls whose host enqueue outlasted that variant's spin (``over_spin``, of ``calls`` per placement)."""
    torch = server.torch
    from cuda_agent.harness.reference import BASELINE_CLONE_ENV, generate_inputs
    from cuda_agent.harness.timing import DeviceTimer, l2_bytes

    if sets is not None and (not sets or any(k not in server.sets for k in sets)):
        raise ValueError(f"sets {sets} are not all made in this process (made: {sorted(server.sets)})")
    if calls < 2:
        raise ValueError(f"calls must be at least 2, got {calls}")
    if placements < 1:
        raise ValueError(f"placements must be at least 1, got {placements}")
    if which not in KINDS:
        raise ValueError(f"which must be one of {list(KINDS)}, got {which!r}")
    device = str(server.device)
    base = server.timer or DeviceTimer(device)
    server.timer = base
    model = server._baseline_fn(which, "default")
    l2 = l2_bytes(device)
    clone_default = os.environ.get(BASELINE_CLONE_ENV) != "0"

    def make_sets(p: int) -> list[list[Any]]:
        if p == 0 and sets is not None:
            return [server.sets[k]["inputs"] for k in sets]
        return [generate_inputs(torch, server.module.get_inputs, DIAGNOSTIC_SEED + 100 * p + k, server.device)
                for k in range(DIAGNOSTIC_SETS)]

    def run(timer: Any, input_sets: list[list[Any]], fn: Any, clone: bool = True) -> dict[str, float]:
        samples = []
        timer.take_host_stats()
        with torch.no_grad():
            for j in range(calls + 3):
                src = input_sets[j % len(input_sets)]
                args = [x.clone() if clone and isinstance(x, torch.Tensor) else x for x in src]
                _, ms, _ = timer.time_call(lambda: fn(*args), warm=args)  # the timer's warm_pages decides
                if j >= 3:
                    samples.append(ms)
        host = timer.take_host_stats()
        return {**_stats(samples), "over_spin": host["over_spin"], "retakes": host["retakes"]}

    per: dict[str, list[dict[str, float]]] = {name: [] for name in ("graded", *VARIANTS)}
    first_sets: list[list[Any]] = []
    for p in range(placements):
        input_sets = make_sets(p)
        if p == 0:
            first_sets = input_sets
        ids = [-1 - k for k in range(len(input_sets))]  # registered for the graded path, removed right after
        for i, xs in zip(ids, input_sets):
            server.sets[i] = {"inputs": xs}
        try:
            before = dict(server.host_stats.get(which, {}))
            graded = _stats(server.time_baseline(which, ids, calls, 3, "default"))
            per["graded"].append({**graded, **{k: server.host_stats[which].get(k, 0) - before.get(k, 0)
                                               for k in ("over_spin", "retakes")}})
        finally:
            for i in ids:
                server.sets.pop(i, None)
        for name, (multiple, mode, clone, warm, spin, retakes) in VARIANTS.items():
            timer = base if name == "standard" and p == 0 else DeviceTimer(
                device, flush_bytes=int(multiple * l2) if multiple else None, flush_mode=mode,
                preroll_us=base.preroll_us if spin is None else spin, warm_pages=warm,
                preroll_retakes=base.preroll_retakes if retakes is None else retakes)
            per[name].append(run(timer, input_sets, model, clone if clone is not None else clone_default))
            del timer
    out: dict[str, Any] = {}
    for name, rows in per.items():
        medians = [r["median_ms"] for r in rows]
        out[name] = {**rows[0], "placements_ms": medians, "over_spin": [r.get("over_spin", 0) for r in rows],
                     "retakes": [r.get("retakes", 0) for r in rows],
                     "spread": (max(medians) - min(medians)) / min(medians) if min(medians) > 0 else None}
    null = torch.empty(1, device=server.device)
    out["null"] = run(base, [[]], lambda: null.fill_(1.0), clone=False)
    first = next((x for x in first_sets[0] if isinstance(x, torch.Tensor)), None)
    if first is not None:
        out["copy"] = run(base, [[first]], lambda x: x.clone(), clone=False)
    info: dict[str, Any] = {"pid": os.getpid(), "which": which, "preroll_us": base.preroll_us, "calls": calls,
                            "placements": placements, "l2_bytes": l2, "flush_bytes": base.flush_buf.numel() * 4,
                            "warm_pages": base.warm_pages, "clone_inputs": clone_default,
                            "preroll_retakes": base.preroll_retakes, "preroll_max_us": base.preroll_max_us}
    if server.device.type == "cuda":
        info["flush_buf_ptr"] = base.flush_buf.data_ptr()
        info["input_ptrs"] = [x.data_ptr() for x in first_sets[0] if isinstance(x, torch.Tensor)]
        info["reserved_bytes"] = torch.cuda.memory_reserved(server.device)
        info["clocks_mhz"] = _clocks(server.device.index or 0)
    try:
        info["cpus"] = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    out["info"] = info
    return out
