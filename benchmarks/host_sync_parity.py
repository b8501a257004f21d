"""Why does the runner time the same eager LSTM slower than the reference process? One difference at a time.

The KernelBench self-check grades each task's own Model against itself; the level-3 LSTMs and GRU read 0.67-0.81
(issue 21). harness/timing_env.py lists every difference between how the reference process times its baselines
and how the runner times the candidate; this benchmark times one launch-heavy, host-bound eager call (KernelBench
36_LSTMHn's LSTM: 6 layers, hidden 256, 512 steps, batch 10) in fresh processes, each set up like one side with one
difference switched, and reports each variant's median and its ratio to the reference's (what a self-check would
read as the self-speedup; 1.0 = no effect):

- ``reference``: the reference process as the harness starts it (the parent's environment plus the timing
  variables), the baseline's timer (retakes), collector off during calls, the spin rule on;
- ``runner``: the runner as the harness starts it (its own environment), the candidate's timer (no retakes, its
  spin following its enqueue), the op audit's profiler run first (warm-up and one audited call), the rest as above;
- ``runner_cupti_kept``: the runner without ``TEARDOWN_CUPTI`` (CUPTI stays attached after the audit: before this
  session's fix); ``runner_no_audit``: the runner with no profiler ever started; ``runner_parent_env``: the runner
  with the reference's environment; ``reference_gc_on``: the baselines' calls with the collector on (before the
  fix); ``runner_no_spin_rule`` / ``reference_no_spin_rule``: the timers without the spin rule (before the fix).

``--h0-on-host`` makes the call wait for the device inside it (its initial state copied from host memory in every
forward, as KernelBench's LSTMs once did), the case the spin rule is for: with the rule both sides report
``spin_blocked`` and spin no longer; without it the enqueue grows to the cap. On the CPU backend there is no spin,
no CUPTI and no events (host-timed calls): the variants still run, so the benchmark is tested there.

``--launches N`` times N tiny back-to-back launches instead (nothing synchronises): with N above the launch
queue's depth the host waits for room while the device spins, the other way a call's enqueue grows with its spin.

``--harness`` also runs the real self-check (harness/evaluator.py ``self_check``: a real runner and reference
process) of the same model, with the timing environment as it is and with ``TEARDOWN_CUPTI`` left out.

    python benchmarks/host_sync_parity.py --device cuda --calls 60 --out host_sync_parity.json
    python benchmarks/host_sync_parity.py --device cpu --size small --calls 10   # the CPU check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: name -> (batch, seq, input, hidden, layers): ``full`` is KernelBench level3/36_LSTMHn's.
SIZES = {"full": (10, 512, 128, 256, 6), "small": (4, 16, 32, 32, 2)}
#: name -> (side, what differs from that side as the harness runs it now).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "reference": ("reference", {}),
    "runner": ("runner", {}),
    "runner_cupti_kept": ("runner", {"drop_env": ["TEARDOWN_CUPTI"]}),
    "runner_no_audit": ("runner", {"audit": False}),
    "runner_parent_env": ("runner", {"parent_env": True}),
    "reference_gc_on": ("reference", {"gc_off": False}),
    "runner_no_spin_rule": ("runner", {"spin_rule": False}),
    "reference_no_spin_rule": ("reference", {"spin_rule": False}),
}

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)

    def forward(self, x, h0, c0):
        _, state = self.lstm(x, (h0, c0))
        return state[0]


def get_inputs():
    return [torch.rand({b}, {s}, {i}), torch.rand({l}, {b}, {h}), torch.rand({l}, {b}, {h})]


def get_init_inputs():
    return [{i}, {h}, {l}]
'''


# ---------------------------------------------------------------------------- child: one side, one variant
def child(cfg: dict[str, Any]) -> dict[str, Any]:
    """Time the LSTM ``cfg['calls']`` times as ``cfg['side']`` would, with ``cfg``'s switches."""
    import gc

    import torch

    from cuda_agent.harness.integrity import runtime
    from cuda_agent.harness.messages import TimerSpec
    from cuda_agent.harness.spin_policy import SpinPolicy
    from cuda_agent.harness.timing import DeviceTimer
    from cuda_agent.harness.timing_env import process_timing_state

    class NoSpinRule(SpinPolicy):
        """The timers before the rule: every take is seen, none marks the call blocked."""

        def observe(self, spin_us: float, enqueue_ms: float) -> bool:
            return False

    device = cfg["device"] if cfg["device"] == "cpu" else "cuda:0"
    torch.set_num_threads(cfg["threads"])
    b, s, i, h, n_layers = SIZES[cfg["size"]]
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(i, h, n_layers, batch_first=True).to(device).eval()
    x = torch.rand(b, s, i, device=device)
    h0, c0 = torch.rand(n_layers, b, h), torch.rand(n_layers, b, h)
    if not cfg["h0_on_host"]:
        h0, c0 = h0.to(device), c0.to(device)

    def forward() -> Any:
        if cfg["launches"]:  # tiny back-to-back launches, nothing that synchronises: does a full queue wait?
            y = x
            for _ in range(cfg["launches"]):
                y = y + 1.0
            return y
        return lstm(x, (h0.to(device), c0.to(device)))[1][0]  # .to: a no-op for device tensors, a copy otherwise

    spec = TimerSpec(preroll_us=200.0 if device != "cpu" else 0.0, preroll_retakes=2, warm_input_pages=True)
    timer = DeviceTimer.from_spec(device, spec, retakes=cfg["side"] == "reference")
    policy = SpinPolicy() if cfg["spin_rule"] else NoSpinRule()
    with torch.no_grad():
        if cfg["audit"]:  # the runner's start (audit warm-up) and an audited verification call
            with runtime.audit_ops():
                (x + 1).sum()
            with runtime.audit_ops():
                forward()
        samples, enqueue = [], []
        for j in range(cfg["warmup"] + cfg["calls"]):
            gc_was_on = gc.isenabled()
            if cfg["gc_off"]:
                gc.disable()
            try:
                _, ms, _ = timer.time_call(forward, warm=[x], policy=policy)
            finally:
                if gc_was_on:
                    gc.enable()
            if j >= cfg["warmup"]:
                samples.append(ms)
                enqueue.append(timer.last_enqueue_ms)
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "samples_ms": samples,
            "median_enqueue_ms": statistics.median(enqueue), "host_stats": timer.host_stats,
            "spin_blocked": policy.blocked, "evidence": policy.evidence, "state": process_timing_state(torch)}


# ---------------------------------------------------------------------------- parent
def side_env(side: str, switches: dict[str, Any], device: str, threads: int) -> dict[str, str]:
    """The environment a ``side`` process starts with as the harness builds it, then ``switches`` applied."""
    from cuda_agent.harness.sandbox import runner_environment
    from cuda_agent.harness.timing_env import timing_env

    reference = {**os.environ, **timing_env(os.environ), "OMP_NUM_THREADS": str(threads)}
    env = runner_environment(device, threads) if side == "runner" and not switches.get("parent_env") else reference
    return {k: v for k, v in env.items() if k not in switches.get("drop_env", [])}


def run_variant(name: str, args: argparse.Namespace) -> dict[str, Any]:
    side, switches = VARIANTS[name]
    cfg = {"device": args.device, "size": args.size, "calls": args.calls, "warmup": args.warmup,
           "threads": args.threads, "h0_on_host": args.h0_on_host, "launches": args.launches, "side": side,
           "audit": switches.get("audit", side == "runner"), "gc_off": switches.get("gc_off", True),
           "spin_rule": switches.get("spin_rule", True)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg)], capture_output=True, text=True,
                          env=side_env(side, switches, args.device, args.threads), timeout=args.variant_timeout_s)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-2000:], "config": cfg}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(config=cfg, seconds=round(time.perf_counter() - t0, 2))
    return out


def harness_self_check(args: argparse.Namespace, keep_cupti: bool) -> dict[str, Any]:
    """The real self-check of the LSTM task (runner and reference process as the harness starts them)."""
    from cuda_agent.harness import timing_env
    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.harness.settings import HarnessSettings
    from cuda_agent.schemas.task import TaskManifest

    b, s, i, h, n_layers = SIZES[args.size]
    task = TaskManifest.from_code("bench/host_sync_lstm", TASK.format(b=b, s=s, i=i, h=h, l=n_layers))
    forced = dict(timing_env.FORCED)
    if keep_cupti:
        timing_env.FORCED.clear()
    try:
        settings = HarnessSettings(timing={"compile_baseline": False})
        with Evaluator(args.device, settings) as ev:
            result = ev.self_check(task)
    finally:
        timing_env.FORCED.update(forced)
    d = result.diagnostics
    return {"status": result.status.value, "speedup_eager": result.speedup_eager,
            "baseline_host": d.baseline_host, "candidate_host": d.candidate_host, "message": result.message[:500]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--size", default="full", choices=sorted(SIZES))
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads of every process (sandbox.cpu_threads)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: " + ", ".join(VARIANTS))
    ap.add_argument("--h0-on-host", action="store_true", help="the forward copies its initial state from the host")
    ap.add_argument("--launches", type=int, default=0, help="time N tiny launches instead of the LSTM (N above the "
                    "launch queue's depth: does a full queue make the call wait for the spin?)")
    ap.add_argument("--harness", action="store_true", help="also the real self-check, CUPTI torn down and kept")
    ap.add_argument("--variant-timeout-s", type=float, default=300.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    # The teardown is what this benchmark measures: on unless the caller's environment says otherwise (the harness
    # keeps it off by default until it has run on a GPU, harness/timing_env.py TEARDOWN_SWITCH).
    from cuda_agent.harness.timing_env import TEARDOWN_SWITCH

    os.environ.setdefault(TEARDOWN_SWITCH, "1")
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; valid: {', '.join(VARIANTS)}")
    results = {name: run_variant(name, args) for name in names}
    ref = results.get("reference", {}).get("median_ms")
    print(f"{'variant':26} {'median ms':>10} {'ref/variant':>11} {'enqueue ms':>11} {'blocked':>8} over_spin")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:26} ERROR {r['error'].splitlines()[-1] if r['error'] else ''}")
            continue
        r["ratio_to_reference"] = ref / r["median_ms"] if ref else None
        ratio = f"{r['ratio_to_reference']:.3f}" if ref else "-"
        print(f"{name:26} {r['median_ms']:10.3f} {ratio:>11} {r['median_enqueue_ms']:11.3f} {str(r['spin_blocked']):>8} "
              f"{int(r['host_stats']['over_spin'])}/{int(r['host_stats']['calls'])}")
    report: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if k != "out"}, "variants": results,
                              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.harness:
        report["harness"] = {"teardown": harness_self_check(args, keep_cupti=False),
                             "cupti_kept": harness_self_check(args, keep_cupti=True)}
        for k, v in report["harness"].items():
            print(f"self-check ({k}): {v['status']} speedup_eager {v['speedup_eager']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str))
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
