"""Where does the per-process shift of short kernels' medians come from? (issue 3's spread target)

The harness measures each profile in a fresh process; a sub-100 us kernel's medians moved by up to 1.9%
between processes although each median was within +-0.3%. ``--processes`` fresh processes, one after another,
each timing every workload with the harness's own :class:`DeviceTimer` (pre-roll spin, L2 flush, device-wide
sync), in two blocks separated by ``--gap-s`` seconds, and for each block:

- the workload's median on the default stream, and on a stream of its own (``stream``);
- the median of a null kernel (one element written) timed the same way, interleaved call by call: the
  protocol's own per-call cost in this process (event bookkeeping, front-end latency);
- the SM clock (NVML) before and after the block;
- the flush mode ``read`` beside the default ``write`` (the first session's finding: a write flush leaves dirty
  lines whose write-back the timed call pays; it moved every time but not the spread).

Printed per workload and quantity: each process's median and the spread (max - min) / min over processes, the
spread between the two blocks of one process (a time drift shows there too; a per-process offset does not), and
the spread of ``median - null median`` (if that is small, the shift is a per-process constant cost).

``--placements N`` adds, for row_sum, N placements inside each process: N flush buffers (N timers) and N input
copies, each its own allocation made while the others are alive (so different device memory), timed as
(timer k, input k), (timer 0, input k) and (timer k, input 0). If the medians move between placements of one
process as much as between processes, the per-process shift is where memory lands (input or flush buffer),
not the process.

    python benchmarks/timing_spread_probe.py --processes 6 --out timing_spread_probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: name -> (shape, op): the workloads, sized like the example tasks (row_sum is the sub-100 us one).
WORKLOADS = {
    "row_sum": ((1024, 8192), "sum"),
    "swish_4m": ((1024, 1024), "swish"),
    "swish_64m": ((4096, 4096), "swish"),
}


def _sm_clock() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - a figure we can do without
        return None


def child(calls: int, preroll_us: float, gap_s: float, placements: int = 0,
          workloads: list[str] | None = None) -> dict:
    import torch

    from cuda_agent.harness.timing import DeviceTimer

    torch.manual_seed(0)
    dev = "cuda"
    timers = {mode: DeviceTimer(dev, preroll_us=preroll_us, flush_mode=mode) for mode in ("write", "read")}
    side = torch.cuda.Stream()
    one = torch.empty(1, device=dev)
    out: dict = {}
    for name, (shape, op) in WORKLOADS.items():
        if workloads is not None and name not in workloads:
            continue
        x_pristine = torch.randn(*shape, device=dev)
        x = torch.empty_like(x_pristine)
        fn = (lambda t: torch.sum(t, dim=1, keepdim=True)) if op == "sum" else (lambda t: t * torch.sigmoid(t))

        def on_side(t):
            with torch.cuda.stream(side):
                r = fn(t)
            return r

        for _ in range(5):
            timers["write"].time_call(lambda: fn(x))
            timers["write"].time_call(lambda: one.fill_(1.0))
        blocks = []
        for b in range(2):
            if b:
                time.sleep(gap_s)
            s: dict[str, list[float]] = {"default": [], "stream": [], "null": [], "read": [], "read_null": []}
            clock0 = _sm_clock()
            for _ in range(calls):
                x.copy_(x_pristine)
                s["default"].append(timers["write"].time_call(lambda: fn(x))[1])
                s["null"].append(timers["write"].time_call(lambda: one.fill_(1.0))[1])
                x.copy_(x_pristine)
                s["stream"].append(timers["write"].time_call(lambda: on_side(x))[1])
                x.copy_(x_pristine)
                s["read"].append(timers["read"].time_call(lambda: fn(x))[1])
                s["read_null"].append(timers["read"].time_call(lambda: one.fill_(1.0))[1])
            row = {k: statistics.median(v) for k, v in s.items()}
            row["default_minus_null"] = row["default"] - row["null"]
            row["read_minus_null"] = row["read"] - row["read_null"]
            row["sm_clock_mhz"] = [clock0, _sm_clock()]
            blocks.append(row)
        out[name] = blocks
    if placements:
        out["placements"] = _placements(placements, calls, preroll_us)
    return out


def _placements(n: int, calls: int, preroll_us: float) -> list[dict[str, float]]:
    """row_sum's median under n flush-buffer and n input placements (see the module docstring)."""
    import torch

    from cuda_agent.harness.timing import DeviceTimer

    shape = WORKLOADS["row_sum"][0]
    pristine = torch.randn(*shape, device="cuda")
    timers = [DeviceTimer("cuda", preroll_us=preroll_us) for _ in range(n)]
    inputs = [torch.empty_like(pristine) for _ in range(n)]
    for x in inputs:
        x.copy_(pristine)
    fn = lambda t: torch.sum(t, dim=1, keepdim=True)  # noqa: E731
    for _ in range(5):
        timers[0].time_call(lambda: fn(inputs[0]))
    rows = []
    for k in range(n):
        s: dict[str, list[float]] = {"both": [], "input_only": [], "flush_only": []}
        for _ in range(calls):  # interleaved, so a drift in time moves all three alike
            s["both"].append(timers[k].time_call(lambda: fn(inputs[k]))[1])
            s["input_only"].append(timers[0].time_call(lambda: fn(inputs[k]))[1])
            s["flush_only"].append(timers[k].time_call(lambda: fn(inputs[0]))[1])
        rows.append({key: statistics.median(v) for key, v in s.items()}
                    | {"input_ptr_mod_2m": inputs[k].data_ptr() % (2 << 20),
                       "flush_ptr_mod_2m": timers[k].flush_buf.data_ptr() % (2 << 20)})
    return rows


def _spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / min(xs) if min(xs) > 0 else float("inf")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--calls", type=int, default=300, help="Timed calls per quantity and block.")
    ap.add_argument("--gap-s", type=float, default=1.0, help="Idle seconds between a process's two blocks.")
    ap.add_argument("--preroll-us", type=float, default=200.0)
    ap.add_argument("--placements", type=int, default=0,
                    help="row_sum under N flush-buffer and input allocations per process (0 = off).")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="Comma-separated subset of: " + ", ".join(WORKLOADS))
    ap.add_argument("--out", type=Path, default=Path("timing_spread_probe.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.calls, args.preroll_us, args.gap_s, args.placements, args.workloads.split(","))))
        return 0
    unknown = set(args.workloads.split(",")) - set(WORKLOADS)
    if unknown:
        ap.error(f"--workloads: unknown {sorted(unknown)}; valid: {', '.join(WORKLOADS)}")
    runs = []
    for i in range(args.processes):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--child", "--calls", str(args.calls), "--preroll-us",
                               str(args.preroll_us), "--gap-s", str(args.gap_s), "--placements", str(args.placements),
                               "--workloads", args.workloads],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            raise SystemExit(f"process {i} failed (rc {proc.returncode})")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"process {i}: {time.perf_counter() - t0:.1f} s", flush=True)
    table: dict = {}
    quantities = ["default", "stream", "null", "default_minus_null", "read", "read_null", "read_minus_null"]
    for name in args.workloads.split(","):
        table[name] = {}
        for q in quantities:
            per_process = [statistics.fmean(b[q] for b in r[name]) for r in runs]
            within = max(_spread([b[q] for b in r[name]]) for r in runs)
            table[name][q] = {"per_process_ms": per_process, "spread": _spread(per_process), "max_within": within}
            print(f"{name:10s} {q:19s} between {table[name][q]['spread'] * 100:6.2f}%  within {within * 100:6.2f}%  "
                  f"us {' '.join('%.2f' % (m * 1e3) for m in per_process)}")
        clocks = [b["sm_clock_mhz"] for r in runs for b in r[name]]
        print(f"{name:10s} SM clock MHz (block start, end): {clocks}")
    if args.placements:
        table["placements"] = {}
        for key in ("both", "input_only", "flush_only"):
            per_process = [[row[key] for row in r["placements"]] for r in runs]
            within = max(_spread(v) for v in per_process)
            between = _spread([statistics.median(v) for v in per_process])
            table["placements"][key] = {"per_process_us": [[m * 1e3 for m in v] for v in per_process],
                                        "max_within": within, "between_medians": between}
            print(f"row_sum placements {key:10s} within a process up to {within * 100:6.2f}%  between processes "
                  f"{between * 100:6.2f}%")
            for i, v in enumerate(per_process):
                print(f"    process {i}: us {' '.join('%.2f' % (m * 1e3) for m in v)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "table": table, "runs": runs},
                                   indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
