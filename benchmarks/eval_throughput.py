"""Evaluation throughput: tasks per GPU-hour for baseline timing plus scoring, ours vs the reference method.

For every example task (``examples/tasks``) with its example solution
(``examples/solutions/<backend>/<task>``), repeated ``--repeats`` times:

- **ours**: probe the task, then ``backend.grade`` the solution: a fresh
  build, verification with fresh seeds, eager + torch.compile baselines
  (measured: the baseline cache is a fresh folder per repeat) and candidate
  timing alternated with them. Time = probe + grade.
- **reference** (ANCHORS.md: the CUDA-Agent release's per-turn scripts,
  ≈ 64 tasks per GPU-hour there): three fresh processes per task -- a
  from-scratch ``torch.utils.cpp_extension`` build, verification on 5
  CPU-built input sets, and profiling with a fresh ``torch.compile`` and the
  profiler-sum timing (5 warm-up + 10 profiled iterations of candidate,
  eager and compile). Needs CUDA.

Tasks per GPU-hour = 3600 / mean seconds per task (one GPU, tasks run one
after another, so wall seconds are GPU-seconds). Timing spread = for each
task and quantity (candidate, eager, compile), (max - min) / min of the
per-repeat medians; the maximum over tasks and quantities is reported.

usage: python benchmarks/eval_throughput.py [--backend cuda] [--repeats 3] [--limit N]
       [--reference-repeats R] [--reference-limit M] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("_reference_turn.py")


def copy_solution(ws_root: Path, solution: Path) -> None:
    """Write the example solution's files over the prepared workspace (protected files untouched)."""
    for path in sorted(solution.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            dest = ws_root / path.relative_to(solution)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(path.read_text())


def run_ours(task_file: Path, backend_name: str, solution: Path, scratch: Path) -> dict[str, Any]:
    """Probe + trusted grading of the example solution in this process's backend."""
    from cuda_agent.harness.tasks import load_task_file
    from cuda_agent.plugin_manager import PluginManager

    t0 = time.perf_counter()
    task = load_task_file(task_file, id=f"examples/{task_file.stem}")
    probe_s = time.perf_counter() - t0
    pm = PluginManager(load_entrypoints=False)
    backend = pm.registry.build("backend", backend_name, {"harness": {"baseline_cache_dir": str(scratch / "baselines")}})
    try:
        ws = backend.prepare_workspace(task, scratch / "ws")
        copy_solution(ws.root, solution)
        t1 = time.perf_counter()
        result = backend.grade(ws, task)
        grade_s = time.perf_counter() - t1
    finally:
        backend.close()
    b = result.baselines
    return {
        "task": task_file.stem, "status": result.status.value, "probe_s": probe_s, "grade_s": grade_s,
        "wall_s": probe_s + grade_s,
        "candidate_ms": result.timing.median_ms if result.timing else None,
        "eager_ms": b.eager.median_ms if b and b.eager else None,
        "compile_ms": b.compile.median_ms if b and b.compile else None,
        "isolation": result.isolation, "flags": result.flags,
    }


def run_reference(task_file: Path, backend_name: str, solution: Path, scratch: Path) -> dict[str, Any]:
    """The reference method: compile, verify, profile as three fresh processes."""
    from cuda_agent.harness.tasks import load_task_file
    from cuda_agent.plugin_manager import PluginManager

    task = load_task_file(task_file, id=f"examples/{task_file.stem}")
    backend = PluginManager(load_entrypoints=False).registry.build("backend", backend_name)
    ws = backend.prepare_workspace(task, scratch / "ref_ws")
    backend.close()
    copy_solution(ws.root, solution)
    out: dict[str, Any] = {"task": task_file.stem}
    total = 0.0
    for step in ("compile", "verify", "profile"):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(CHILD), step, str(ws.root), str(scratch / "ref_build")],
                              capture_output=True, text=True, timeout=1800)
        dt = time.perf_counter() - t0
        total += dt
        out[f"{step}_s"] = dt
        if proc.returncode != 0:
            out["error"] = f"{step} failed: {proc.stderr[-1500:]}"
            break
        out.update({k: v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items() if k != "step"})
    out["wall_s"] = total
    return out


def max_spread(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Max over tasks and quantities of (max - min) / min of per-repeat medians."""
    worst: dict[str, Any] = {"spread": 0.0, "task": None, "quantity": None}
    for task in sorted({r["task"] for r in rows}):
        for q in ("candidate_ms", "eager_ms", "compile_ms"):
            vals = [r[q] for r in rows if r["task"] == task and r.get(q)]
            if len(vals) >= 2:
                s = (max(vals) - min(vals)) / min(vals)
                if s > worst["spread"]:
                    worst = {"spread": s, "task": task, "quantity": q, "values": vals}
    return worst


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_s"] for r in rows if "error" not in r]
    mean = statistics.fmean(walls) if walls else None
    return {
        "tasks_measured": len(walls), "failures": len(rows) - len(walls),
        "mean_s_per_task": mean, "tasks_per_gpu_hour": 3600.0 / mean if mean else None,
        "max_median_spread": max_spread(rows), "per_task": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", help="'cuda' (the comparison) or 'cpu' (ours only, smoke test).")
    ap.add_argument("--tasks", default=str(REPO / "examples" / "tasks"), help="Folder of task files.")
    ap.add_argument("--repeats", type=int, default=3, help="Repeated runs (for the timing spread).")
    ap.add_argument("--limit", type=int, default=None, help="At most this many tasks.")
    ap.add_argument("--no-reference", action="store_true", help="Skip the reference method.")
    ap.add_argument("--reference-repeats", type=int, default=None,
                    help="Repeats of the reference method (default: --repeats; it costs ~1 GPU-minute per task).")
    ap.add_argument("--reference-limit", type=int, default=None,
                    help="Run the reference method on the first N tasks only (its per-task cost is what matters).")
    ap.add_argument("--out", default="eval_throughput.json", help="JSON output path.")
    args = ap.parse_args(argv)

    from rich.progress import Progress

    import torch

    tasks = sorted(p for p in Path(args.tasks).glob("*.py") if not p.name.startswith("_"))[: args.limit]
    solutions = REPO / "examples" / "solutions" / args.backend
    with_ref = not args.no_reference and args.backend == "cuda" and torch.cuda.is_available()
    ours_rows: list[dict[str, Any]] = []
    ref_rows: list[dict[str, Any]] = []
    ref_reps = args.repeats if args.reference_repeats is None else args.reference_repeats
    ref_tasks = tasks if args.reference_limit is None else tasks[: args.reference_limit]
    t_start = time.perf_counter()

    def build_report(partial: bool) -> dict[str, Any]:
        ours = summarize(ours_rows)
        report: dict[str, Any] = {
            "benchmark": "eval_throughput",
            "partial": partial,
            "elapsed_s": time.perf_counter() - t_start,
            "backend": args.backend,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu",
            "torch": torch.__version__,
            "python": platform.python_version(),
            "repeats": args.repeats,
            "reference_repeats": ref_reps,
            "reference_tasks": [t.stem for t in ref_tasks] if with_ref else [],
            "tasks": [t.stem for t in tasks],
            "ours": ours,
            "reference": summarize(ref_rows) if with_ref else None,
            "anchor_reference_tasks_per_gpu_hour": 64,
        }
        if with_ref and report["reference"]["tasks_per_gpu_hour"] and ours["tasks_per_gpu_hour"]:
            report["speedup_vs_reference"] = ours["tasks_per_gpu_hour"] / report["reference"]["tasks_per_gpu_hour"]
        return report

    def record(rows: list[dict[str, Any]], row: dict[str, Any], who: str) -> None:
        """Keep ``row``, print one line, rewrite the JSON (a run cut short keeps every finished row)."""
        rows.append(row)
        print(f"[{time.perf_counter() - t_start:7.1f} s] {who:9s} {row['task']:15s} repeat {row['repeat']}: "
              f"{row['wall_s']:.1f} s {row.get('status') or row.get('error', '')[:80]}", flush=True)
        Path(args.out).write_text(json.dumps(build_report(partial=True), indent=2, default=str))

    with Progress(disable=not sys.stdout.isatty()) as progress, tempfile.TemporaryDirectory(prefix="eval-throughput-") as tmp:
        bar = progress.add_task("tasks x repeats", total=len(tasks) * args.repeats)
        for rep in range(args.repeats):
            for task_file in tasks:
                scratch = Path(tmp) / f"r{rep}" / task_file.stem
                scratch.mkdir(parents=True)
                record(ours_rows, {**run_ours(task_file, args.backend, solutions / task_file.stem, scratch), "repeat": rep}, "ours")
                if with_ref and rep < ref_reps and task_file in ref_tasks:
                    row = run_reference(task_file, args.backend, solutions / task_file.stem, scratch)
                    record(ref_rows, {**row, "repeat": rep}, "reference")
                progress.advance(bar)
    report = build_report(partial=False)
    ours = report["ours"]
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print(f"ours: {ours['tasks_per_gpu_hour']} tasks/GPU-hour, max median spread {ours['max_median_spread']['spread']:.4f}")
    if with_ref:
        r = report["reference"]
        print(f"reference: {r['tasks_per_gpu_hour']} tasks/GPU-hour, max median spread {r['max_median_spread']['spread']:.4f}")
        print(f"ratio: {report.get('speedup_vs_reference')}")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
