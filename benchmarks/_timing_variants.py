"""Benchmark-only diagnostics: a task's eager (or compiled) baseline timed several ways, in a process of its own.

Issue 4's open spread: row_sum's eager baseline took one of two discrete levels (17.95 / 18.85 us on the H200)
in the evaluator's reference processes. Timing it in the same process under variants of the protocol (H200,
2026-12-01, first version of this module) showed the level is not the process's: it flips inside one process
when either the flush buffer or the input sets are allocated anew, with a write and a read flush alike, and not
without a flush. So it follows how the flush buffer and the data lie relative to each other.

Here every variant is timed over ``placements`` placements (new input sets and new timers, so new flush buffers,
each), and reported per placement: a protocol whose per-placement medians agree is placement-proof.

- ``standard``: the protocol's own timer (rotated sets, the clone setting, its flush: ``timer.l2_flush_multiple``
  times the L2, written, and its ``timer.warm_input_pages``);
- ``write_2x`` / ``write_4x`` / ``write_8x``: a written flush buffer of 2, 4 or 8 times the L2 (is 2x not enough
  to evict every line of the data?);
- ``read_2x`` / ``read_4x``: the same buffer read (clean lines left);
- ``touch_2x``: the 2x write flush, then one byte of every 2 MiB page of the inputs read
  (:func:`~cuda_agent.harness.timing.warm_input_pages`: the data's address translations warm, almost none of its
  lines cached: is it the TLB?); every other variant but ``standard`` without that;
- ``direct`` / ``direct_warm``: the 2x write flush on the set's own tensors, no clone per call (without / with the
  pages warmed);
- ``graded``: :meth:`cuda_agent.harness.reference_baselines.Baselines.time` itself on this placement's sets (the
  graded code path, with the protocol's ``baseline_clone_inputs`` and timer);
- ``spin_500`` / ``spin_1000``: the process's protocol with a 500 / 1000 us pre-roll spin and no retakes (does a
  longer spin steady a compiled model's time under load? its host path may outlast the 200 us default);
- ``no_retakes``: the process's protocol without ``timing_preroll_retakes`` (every other variant has the
  process's retakes);
- ``null`` and ``copy`` (once): one element written (the protocol's own cost); the input's clone itself.

Measured on the H200 (2026-12-01): the slow level came back in about one placement of three with every flush
size and kind; ``touch_2x`` was free of it in one run (41 of 42 placements) and not in the next (where the process
itself warmed pages and ``standard`` and ``graded`` showed both levels too); ``direct_warm`` gave 17.98-18.32 us in
all 18 placements, ``direct`` 17.84-18.85 us: writing the inputs just before the flush is what brings the slow
level, hence the protocol's ``baseline_clone_inputs`` false by default.

Each entry: per-placement medians (ms), their spread, fastest call and IQR. ``benchmarks/eval_throughput.py
--diagnose TASKS`` runs this file as its own process (``python benchmarks/_timing_variants.py`` reading one JSON
request on stdin, writing the JSON result on stdout) under the device's timing lock. Until issue 23 it ran inside
the trusted reference process; benchmark-only code lives outside the trusted processes now, so the process timed
here is not the graded one (the placements within it still are what the diagnostics compare).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
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


def timing_variants(code: str, device: str, timer: dict[str, Any], clone_inputs: bool, calls: int = 100,
                    placements: int = 3, which: str = "eager") -> dict[str, Any]:
    """The task's eager model (``code``), or with ``which`` 'compile' its ``torch.compile`` wrapper, timed per
    variant and placement on ``device`` with the protocol's per-process part ``timer``
    (:class:`~cuda_agent.harness.messages.TimerSpec` fields) and clone setting. Every entry also counts the calls
    whose host enqueue outlasted that variant's spin (``over_spin``, of ``calls`` per placement)."""
    import torch

    from cuda_agent.harness.messages import TimerSpec
    from cuda_agent.harness.reference_baselines import Baselines
    from cuda_agent.harness.reference_sets import HeldSets, generate_inputs, jsonable, load_task_module
    from cuda_agent.harness.timing import DeviceTimer, l2_bytes

    spec = TimerSpec(**timer)
    module = load_task_module(code)
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    torch.manual_seed(42)
    with torch.device(dev):
        model = module.Model(*jsonable(list(module.get_init_inputs())))
    from cuda_agent.harness.model_mode import set_task_mode

    model = set_task_mode(model, torch, dev)
    held = HeldSets(torch, module.get_inputs, model, dev)
    graded = Baselines(torch, model, dev, held, module.get_inputs, spec, clone_inputs, False)
    if calls < 2:
        raise ValueError(f"calls must be at least 2, got {calls}")
    if placements < 1:
        raise ValueError(f"placements must be at least 1, got {placements}")
    if which not in KINDS:
        raise ValueError(f"which must be one of {list(KINDS)}, got {which!r}")
    base = DeviceTimer.from_spec(device, spec)
    graded.timer = base
    fn = graded.fn(which, "default")
    l2 = l2_bytes(device)
    clone_default = clone_inputs

    def make_sets(p: int) -> list[list[Any]]:
        return [generate_inputs(torch, module.get_inputs, DIAGNOSTIC_SEED + 100 * p + k, dev)
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
        ids = list(range(len(input_sets)))
        for k in ids:  # this placement's sets, made from their public seeds; the graded path times these tensors
            held.make(k, DIAGNOSTIC_SEED + 100 * p + k).inputs = input_sets[k]
        before = dict(graded.host_stats.get(which, {}))
        timed = _stats(graded.time(which, ids, calls, 3, "default"))
        per["graded"].append({**timed, **{k: graded.host_stats[which].get(k, 0) - before.get(k, 0)
                                          for k in ("over_spin", "retakes")}})
        for name, (multiple, mode, clone, warm, spin, retakes) in VARIANTS.items():
            timer = base if name == "standard" and p == 0 else DeviceTimer(
                device, flush_bytes=int(multiple * l2) if multiple else None, flush_mode=mode or "write",
                preroll_us=base.preroll_us if spin is None else spin,
                warm_pages=base.warm_pages if warm is None else warm,
                preroll_retakes=base.preroll_retakes if retakes is None else retakes,
                preroll_max_us=base.preroll_max_us, flush_multiple=spec.l2_flush_multiple)
            per[name].append(run(timer, input_sets, fn, clone if clone is not None else clone_default))
            del timer
    out: dict[str, Any] = {}
    for name, rows in per.items():
        medians = [r["median_ms"] for r in rows]
        out[name] = {**rows[0], "placements_ms": medians, "over_spin": [r.get("over_spin", 0) for r in rows],
                     "retakes": [r.get("retakes", 0) for r in rows],
                     "spread": (max(medians) - min(medians)) / min(medians) if min(medians) > 0 else None}
    null = torch.empty(1, device=dev)
    out["null"] = run(base, [[]], lambda: null.fill_(1.0), clone=False)
    first = next((x for x in first_sets[0] if isinstance(x, torch.Tensor)), None)
    if first is not None:
        out["copy"] = run(base, [[first]], lambda x: x.clone(), clone=False)
    info: dict[str, Any] = {"pid": os.getpid(), "which": which, "preroll_us": base.preroll_us, "calls": calls,
                            "placements": placements, "l2_bytes": l2, "flush_bytes": base.flush_buf.numel() * 4,
                            "warm_pages": base.warm_pages, "clone_inputs": clone_default,
                            "preroll_retakes": base.preroll_retakes, "preroll_max_us": base.preroll_max_us}
    if dev.type == "cuda":
        info["flush_buf_ptr"] = base.flush_buf.data_ptr()
        info["input_ptrs"] = [x.data_ptr() for x in first_sets[0] if isinstance(x, torch.Tensor)]
        info["reserved_bytes"] = torch.cuda.memory_reserved(dev)
        info["clocks_mhz"] = _clocks(dev.index or 0)
    try:
        info["cpus"] = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    out["info"] = info
    return out


def run_in_own_process(code: str, device: str, timer: dict[str, Any], clone_inputs: bool, calls: int = 100,
                       placements: int = 3, which: str = "eager", timeout_s: float = 600.0) -> dict[str, Any]:
    """:func:`timing_variants` in a fresh process (this file run as a script): the parent holds the device's timing
    lock around it; the trusted processes are never asked to run diagnostics."""
    request = {"code": code, "device": device, "timer": timer, "clone_inputs": clone_inputs, "calls": calls,
               "placements": placements, "which": which}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve())], input=json.dumps(request), text=True,
                          capture_output=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"timing variants failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    """Read one request (JSON) on stdin, print the variants' figures (JSON) on stdout."""
    request = json.loads(sys.stdin.read())
    print(json.dumps(timing_variants(**request)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
