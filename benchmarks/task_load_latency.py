"""Latency of loading (probing) tasks: warm probe servers vs one fresh process per task.

Loads every example task (``examples/tasks``) ``--copies`` times as distinct tasks (a comment line gives each
copy its own code), ``--concurrency`` at once, first with one fresh sandboxed process per probe
(``CUDA_AGENT_PROBE_SERVER=0``), then with warm probe servers (the default; their start-up is inside the
measured time). Prints seconds per task (median, and the wall of the whole batch) and writes JSON.

    python benchmarks/task_load_latency.py --sizes cpu --copies 4 --out task_load_latency.json
    python benchmarks/task_load_latency.py --sizes full --device cuda --concurrency 8 --out task_load_latency.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run(mode: str, codes: list[tuple[str, str]], sizes: str, device: str, concurrency: int) -> dict[str, Any]:
    """Load every (name, code) with servers 'on' or 'off'; per-task seconds and the batch wall."""
    from cuda_agent.harness._probe_server import SERVER_ENV, close_servers
    from cuda_agent.harness.tasks import load_task_code

    os.environ[SERVER_ENV] = "1" if mode == "servers" else "0"
    close_servers()  # servers start inside the measured time

    def one(item: tuple[str, str]) -> float:
        name, code = item
        t0 = time.perf_counter()
        load_task_code(code, f"bench/{name}", sizes=sizes, device=device)  # type: ignore[arg-type]
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as ex:
        seconds = list(ex.map(one, codes))
    wall = time.perf_counter() - t0
    close_servers()
    return {"mode": mode, "tasks": len(codes), "wall_s": wall, "median_s": statistics.median(seconds),
            "max_s": max(seconds), "per_task_s": seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", choices=["cpu", "full"], default="cpu", help="Task sizes (full ones need a GPU).")
    ap.add_argument("--device", default="cpu", help="Where the probe runs the tasks: cpu, cuda or auto.")
    ap.add_argument("--copies", type=int, default=2, help="Distinct copies of every example task.")
    ap.add_argument("--concurrency", type=int, default=2, help="Tasks loading at once.")
    ap.add_argument("--modes", default="fresh,servers", help="Comma-separated: fresh, servers.")
    ap.add_argument("--out", type=Path, default=Path("task_load_latency.json"))
    args = ap.parse_args()
    tasks = sorted(p for p in (REPO / "examples" / "tasks").glob("*.py") if not p.name.startswith("_"))
    codes = [(f"{t.stem}_{c}", t.read_text().rstrip("\n") + f"\n# task_load_latency copy {c}\n")
             for c in range(args.copies) for t in tasks]
    report: dict[str, Any] = {"benchmark": "task_load_latency", "sizes": args.sizes, "device": args.device,
                              "concurrency": args.concurrency, "cpus": len(os.sched_getaffinity(0)), "runs": []}
    for mode in args.modes.split(","):
        row = run(mode.strip(), codes, args.sizes, args.device, args.concurrency)
        report["runs"].append(row)
        print(f"{row['mode']:8s} {row['tasks']} tasks in {row['wall_s']:.1f} s: median {row['median_s']:.2f} s per task, "
              f"max {row['max_s']:.2f} s", flush=True)
        args.out.write_text(json.dumps(report, indent=1))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
