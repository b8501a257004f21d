"""Where a sandboxed candidate runner's start goes: wall and CPU seconds per phase, over N real runners.

    python benchmarks/runner_start.py --backend cuda --runners 8 --out runner_start.json
    python benchmarks/runner_start.py --backend cpu --runners 3 --parallel 1

A learning run starts ~4.5 runners per episode (one per verify, profile and grade); on the H200 they took half of
the host's CPU in session 22-23 and bound the episode rate. This starts ``--runners`` of them through the
evaluator's own pool (``--parallel`` at a time, the default settings of the backend), waits for each to be ready
and reads the phases it reports (``Ready.start_phases``: interpreter, imports, device_init, audit_warmup, ...).
Prints a table of medians and writes JSON with every runner's phases.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def start_one(pool: Any) -> dict[str, Any]:
    proc = pool.acquire()
    try:
        proc.wait_ready()
        return {"start_s": proc.start_s, "start_cpu_s": proc.start_cpu_s,
                "phases": {k: {"wall_s": v.wall_s, "cpu_s": v.cpu_s} for k, v in proc.start_phases.items()}}
    finally:
        pool.release(proc)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    names = list(dict.fromkeys(k for r in rows for k in r["phases"]))
    med = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    return {
        "runners": len(rows),
        "start_s_median": med([r["start_s"] for r in rows if r["start_s"] is not None]),
        "start_cpu_s_median": med([r["start_cpu_s"] for r in rows if r["start_cpu_s"] is not None]),
        "phases": {n: {"wall_median": med([r["phases"][n]["wall_s"] for r in rows if n in r["phases"]]),
                       "cpu_median": med([r["phases"][n]["cpu_s"] for r in rows if n in r["phases"]])}
                   for n in names},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--runners", type=int, default=8, help="runners to start (each used for nothing, then killed)")
    ap.add_argument("--parallel", type=int, default=1, help="runners starting at once")
    ap.add_argument("--out", type=Path, default=None, help="JSON file to write")
    args = ap.parse_args()

    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.harness.settings import HarnessSettings

    ev = Evaluator(args.backend, HarnessSettings(sandbox={"runners_ahead": 0}))
    t0 = time.time()
    try:
        pool = ev.runners("verify")
        with ThreadPoolExecutor(args.parallel) as ex:
            rows = list(ex.map(lambda _: start_one(pool), range(args.runners)))
    finally:
        ev.close()
    out = {"backend": args.backend, "parallel": args.parallel, "wall_s": round(time.time() - t0, 2),
           "summary": summarize(rows), "runners": rows}
    s = out["summary"]
    print(f"{s['runners']} runners ({args.parallel} at a time): start {s['start_s_median']} s median, "
          f"CPU {s['start_cpu_s_median']} s")
    print(f"{'phase':<16}{'wall s':>10}{'cpu s':>10}")
    for name, v in s["phases"].items():
        print(f"{name:<16}{v['wall_median']!s:>10}{v['cpu_median']!s:>10}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
    sys.exit(0 if rows else 1)


if __name__ == "__main__":
    main()
