"""Why does a task's torch.compile baseline move between processes? (issue 4's spread figure)

In ``eval_throughput`` runs on the H200 the compile baseline of ``conv2d_relu`` (about 0.11 ms) measured
0.110-0.131 ms, 0.113-0.157 ms and once 0.199 ms across processes, while its eager baseline stayed within 0.6%.
Two explanations predict different things:

- **a different program per process** (inductor or cuDNN choosing another algorithm or kernel configuration):
  the slow processes run kernels with other names, or another number of kernels;
- **the same program, placed differently** (memory addresses, clocks): the same kernels, other durations; the
  eager model is also timed on its inputs copied to several byte offsets inside one allocation, and on inputs
  drawn from other seeds.

``--processes`` fresh processes, one after another, each compiling the task's model (``torch.compile``, default
mode, as the harness does) and timing eager and compiled with the harness's own :class:`DeviceTimer`, then one
``torch.profiler`` pass naming every device kernel of a compiled call with its mean duration. Printed: per
process the medians and the kernel list's fingerprint; the spread over processes; which kernels differ.

    python benchmarks/compile_baseline_probe.py --task examples/tasks/conv2d_relu.py --processes 5 --out probe.json

The eager model is also timed the way the harness's reference process times it (``eager_clone_rotated_ms``):
over ``--sets`` seeded input sets in rotation, each call on fresh clones. ``--bystanders K`` keeps K other
processes alive beside every timed process, each holding a CUDA context (and, with ``--bystander-period-ms P``,
launching a one-element kernel every P ms): the evaluator's runners and spare reference processes are such
bystanders. Row_sum's eager baseline measured two discrete levels (17.95 / 18.85 us) across the evaluator's
reference processes and one level (18.0 us) in this probe; these conditions are what differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path


#: Byte offsets of the placement test (all multiples of 16, so vectorised loads stay possible).
OFFSETS = (0, 512, 4096, 65536, 1 << 20, (2 << 20) + 512)


def bystander(device: str, period_ms: float) -> None:
    """Hold a CUDA context (and 256 MiB) until killed; with a period, launch a one-element kernel every period."""
    import torch

    if device == "cuda":
        hold = torch.empty(64 << 20, dtype=torch.float32, device=device)
        torch.cuda.synchronize()
        print("ready", flush=True)
        while True:
            if period_ms > 0:
                hold[:1].add_(1.0)
                time.sleep(period_ms / 1e3)
            else:
                time.sleep(3600)
    print("ready", flush=True)
    time.sleep(3600)


def child(task_path: str, calls: int, preroll_us: float, device: str = "cuda", sets: int = 5) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from cuda_agent.harness.timing import DeviceTimer

    from cuda_agent.harness.tasks import apply_cpu_sizes, has_cpu_sizes

    code = Path(task_path).read_text()
    if device == "cpu" and has_cpu_sizes(code):  # the sizes the cpu backend grades at (H200 sizes take ~0.25 s a call)
        code = apply_cpu_sizes(code)
    task = types.ModuleType("task_module")
    exec(compile(code, task_path, "exec"), task.__dict__)
    torch.manual_seed(0)
    from cuda_agent.harness.model_mode import set_task_mode

    model = set_task_mode(task.Model(*task.get_init_inputs()), torch, device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    t0 = time.perf_counter()
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    timer = DeviceTimer(device, preroll_us=preroll_us)
    free_gib = torch.cuda.mem_get_info()[0] / 2**30 if device == "cuda" else None
    out: dict = {"compile_s": compile_s, "cudnn_benchmark": torch.backends.cudnn.benchmark,
                 "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32, "free_mem_gib": free_gib}
    with torch.no_grad():
        for name, fn in (("eager", model), ("compile", compiled)):
            for _ in range(5):
                timer.time_call(lambda: fn(*inputs))
            samples = [timer.time_call(lambda: fn(*inputs))[1] for _ in range(calls)]
            out[f"{name}_ms"] = statistics.median(samples)
            out[f"{name}_min_ms"] = min(samples)
            with profile(activities=[ProfilerActivity.CUDA if device == "cuda" else ProfilerActivity.CPU]) as prof:
                for _ in range(10):
                    fn(*inputs)
                timer.sync()
            attr = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
            kernels = sorted(((e.key, e.count // 10, getattr(e, attr) / max(1, e.count) / 1000.0)
                              for e in prof.key_averages() if getattr(e, attr) > 0), key=lambda k: -k[2])
            out[f"{name}_kernels"] = [{"name": k[:160], "per_call": c, "ms": ms} for k, c, ms in kernels]
            out[f"{name}_fingerprint"] = hashlib.sha256(json.dumps([(k, c) for k, c, _ in kernels]).encode()).hexdigest()[:12]
        # Input data: the harness times on several seeded input sets; does any set's data change the time?
        by_seed = {}
        for seed in range(4):
            torch.manual_seed(1000 + seed)
            xs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
            for _ in range(3):
                timer.time_call(lambda: model(*xs))
            by_seed[seed] = statistics.median(timer.time_call(lambda: model(*xs))[1] for _ in range(calls // 2))
        out["eager_by_seed_ms"] = by_seed
        # The reference process's way: seeded sets in rotation, fresh clones for every call.
        rotated = []
        for seed in range(sets):
            torch.manual_seed(2000 + seed)
            rotated.append([x.to(device) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()])
        samples = []
        for j in range(calls + 5):
            args = [x.clone() if isinstance(x, torch.Tensor) else x for x in rotated[j % sets]]
            ms = timer.time_call(lambda: model(*args))[1]
            if j >= 5:
                samples.append(ms)
        out["eager_clone_rotated_ms"] = statistics.median(samples)
        # Placement: the same data at other byte offsets inside one allocation (each tensor input). A per-process
        # shift that follows the offset is the inputs' placement, not the program.
        by_offset = {}
        for offset in OFFSETS:
            placed = []
            for x in inputs:
                if isinstance(x, torch.Tensor):
                    nbytes = x.numel() * x.element_size()
                    raw = torch.empty(nbytes + offset, dtype=torch.uint8, device=x.device)
                    view = raw[offset:].view(x.dtype).view(x.shape)
                    view.copy_(x)
                    placed.append(view)
                else:
                    placed.append(x)
            for _ in range(3):
                timer.time_call(lambda: model(*placed))
            by_offset[offset] = statistics.median(timer.time_call(lambda: model(*placed))[1] for _ in range(calls // 2))
            del placed, raw
        out["eager_by_offset_ms"] = by_offset
        out["input_ptr_mod_256"] = [x.data_ptr() % 256 for x in inputs if isinstance(x, torch.Tensor)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default=str(Path(__file__).resolve().parents[1] / "examples" / "tasks" / "conv2d_relu.py"))
    ap.add_argument("--processes", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200, help="Timed calls per quantity and process.")
    ap.add_argument("--preroll-us", type=float, default=200.0)
    ap.add_argument("--device", default="cuda", help="cuda (the probe) or cpu (a smoke test of the script).")
    ap.add_argument("--sets", type=int, default=5, help="Input sets of the reference-process-style eager timing.")
    ap.add_argument("--bystanders", type=int, default=0, help="Other processes holding a CUDA context meanwhile.")
    ap.add_argument("--bystander-period-ms", type=float, default=0.0,
                    help="A bystander launches a one-element kernel this often (0 = idle context).")
    ap.add_argument("--bystander", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="compile_baseline_probe.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.bystander:
        bystander(args.device, args.bystander_period_ms)
        return 0
    if args.child:
        print(json.dumps(child(args.task, args.calls, args.preroll_us, args.device, args.sets)))
        return 0
    helpers = [subprocess.Popen([sys.executable, __file__, "--bystander", "--device", args.device,
                                 "--bystander-period-ms", str(args.bystander_period_ms)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for _ in range(args.bystanders)]
    try:
        for h in helpers:
            if h.stdout is None or h.stdout.readline().strip() != "ready":
                print("a bystander did not start")
                return 1
        return _probe(args)
    finally:
        for h in helpers:
            h.kill()
            h.wait()


def _probe(args: argparse.Namespace) -> int:
    """The timed processes, one after another; prints and writes the report."""
    rows = []
    for i in range(args.processes):
        proc = subprocess.run([sys.executable, __file__, "--child", "--task", args.task, "--calls", str(args.calls),
                               "--preroll-us", str(args.preroll_us), "--device", args.device, "--sets", str(args.sets)],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            print(f"process {i} failed: {proc.stderr[-2000:]}")
            return 1
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"process {i}: eager {row['eager_ms']:.4f} ms [{row['eager_fingerprint']}]  compile {row['compile_ms']:.4f} ms "
              f"[{row['compile_fingerprint']}]  compile time {row['compile_s']:.1f} s  eager by input seed "
              f"{[round(v, 5) for v in row['eager_by_seed_ms'].values()]}  by input offset "
              f"{ {k: round(v, 5) for k, v in row['eager_by_offset_ms'].items()} }  clone-rotated "
              f"{row['eager_clone_rotated_ms']:.5f}", flush=True)
        for k in row["eager_kernels"]:
            print(f"    eager {k['ms']:.4f} ms x{k['per_call']}  {k['name'][:110]}")
        for k in row["compile_kernels"]:
            print(f"    {k['ms']:.4f} ms x{k['per_call']}  {k['name'][:110]}")
    report: dict = {"task": args.task, "processes": rows, "bystanders": args.bystanders,
                    "bystander_period_ms": args.bystander_period_ms, "sets": args.sets}
    for q in ("eager_ms", "eager_clone_rotated_ms", "compile_ms"):
        vals = [r[q] for r in rows]
        report[f"{q}_spread"] = (max(vals) - min(vals)) / min(vals)
        print(f"{q}: {['%.4f' % v for v in vals]}  spread {100 * report[f'{q}_spread']:.2f}%")
    report["compile_programs"] = sorted({r["compile_fingerprint"] for r in rows})
    print(f"distinct compiled programs: {len(report['compile_programs'])}")
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
