"""Evaluation throughput: tasks per GPU-hour for baseline timing plus scoring, ours vs the reference method.

For every example task (``examples/tasks``) with its example solution
(``examples/solutions/<backend>/<task>``), repeated ``--repeats`` times:

- **ours**: the way ``cuda-agent eval`` runs at scale: one backend per
  repeat (its runner pool and reference processes started inside the
  measured time), ``--concurrency`` tasks in flight, each probed, built in
  the shared build pool, then graded under the device's lock (the eval
  runner's own ``DevicePool``): verification with fresh seeds, eager +
  torch.compile baselines (measured: the baseline cache is a fresh folder
  per repeat) and candidate timing alternated with them. Time = the
  repeat's wall clock; the device lock's busy share is reported too.
- **reference** (ANCHORS.md: the CUDA-Agent release's per-turn scripts,
  ≈ 64 tasks per GPU-hour there): three fresh processes per task -- a
  from-scratch ``torch.utils.cpp_extension`` build, verification on 5
  CPU-built input sets, and profiling with a fresh ``torch.compile`` and the
  profiler-sum timing (5 warm-up + 10 profiled iterations of candidate,
  eager and compile). Needs CUDA.

Tasks per GPU-hour: ours = 3600 x tasks / wall seconds of the repeat (one
GPU); reference = 3600 / mean seconds per task (tasks one after another, as
the release runs them). Timing spread = for each
task and quantity (candidate, eager, compile), (max - min) / min of the
per-repeat medians; the maximum over tasks and quantities is reported.

``--reference-profiles P`` runs the reference method's profile step P times per task (fresh processes), so
its own spread is known; ``--reference-tasks a,b`` picks the tasks it runs on. Each of our rows carries
its medians' dispersion (fastest call, IQR, calls).

usage: python benchmarks/eval_throughput.py [--backend cuda] [--repeats 3] [--limit N] [--concurrency C]
       [--reference-repeats R] [--reference-limit M | --reference-tasks a,b] [--reference-profiles P]
       [-o harness.BLOCK.KEY=VALUE | -o experiments.KEY=VALUE ...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _settings import add_settings_argument, load_settings  # noqa: E402
#: Separates a task's name from its copy number in ``--copies`` task files (``swish__copy2``).
COPY_MARK = "__copy"
#: The timed quantities of a task, ours and the reference method's.
QUANTITIES = ("candidate_ms", "eager_ms", "compile_ms")


def task_copies(tasks: list[Path], copies: int, folder: Path) -> list[Path]:
    """``copies`` distinct task files per task in ``folder``: the same code plus a comment naming the copy, so
    each has its own code hash (own reference process, own baselines: nothing measured is shared)."""
    if copies <= 1:
        return tasks
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for c in range(copies):
        for t in tasks:
            dest = folder / f"{t.stem}{COPY_MARK}{c}.py"
            dest.write_text(t.read_text().rstrip("\n") + f"\n# eval_throughput copy {c}\n")
            out.append(dest)
    return out


def copy_solution(ws_root: Path, solution: Path) -> None:
    """Write the example solution's files over the prepared workspace (protected files untouched)."""
    for path in sorted(solution.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            dest = ws_root / path.relative_to(solution)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(path.read_text())


def diagnose_eager(backend: Any, task: Any, calls: int, placements: int = 3, which: str = "eager") -> dict[str, Any]:
    """``task``'s eager (or, ``which``, compiled) baseline timed under protocol variants with the evaluator's own
    protocol, in a diagnostics process of its own (``benchmarks/_timing_variants.py``: benchmark-only code never
    runs in the trusted reference process), under the device's timing lock."""
    from _timing_variants import run_in_own_process

    ev = backend.evaluator()
    with ev.lock:
        return run_in_own_process(backend.task_for(task).code, ev.device, ev.protocol.timer.model_dump(),
                                  ev.protocol.baseline_clone_inputs, calls, placements, which)


def over_spin_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per task copy with a baseline call whose host enqueue outlasted the spin (``baseline_host``): the
    calls still over it after their retakes, of all, the longest enqueue, the retakes taken."""
    lines = []
    for row in rows:
        stats = row.get("baseline_host") or {}
        parts = [f"{kind} {s['over_spin']}/{s['calls']} (max {s['max_enqueue_ms']:.3f} ms"
                 + (f", {s['retakes']} retakes)" if s.get("retakes") else ")")
                 for kind, s in sorted(stats.items()) if s.get("over_spin") or s.get("retakes")]
        if parts:
            lines.append(f"  {row['task']} r{row['repeat']}: " + ", ".join(parts))
    return lines


def _variant_text(name: str, v: dict[str, Any]) -> str:
    """``name m1/m2/m3`` (us per placement), with ``[over spin a/b/c]`` where calls outlasted the spin (after
    their retakes) and ``[retakes x/y/z]`` where calls were taken again."""
    text = f"{name} " + "/".join(f"{m * 1e3:.2f}" for m in v.get("placements_ms", [v["median_ms"]]))
    for key, label in (("over_spin", "over spin"), ("retakes", "retakes")):
        counts = v.get(key)
        counts = counts if isinstance(counts, list) else [counts or 0]
        if any(counts):
            text += f" [{label} {'/'.join(str(n) for n in counts)}]"
    return text


def diagnostics_lines(rows: list[dict[str, Any]], repeats: list[dict[str, Any]]) -> list[str]:
    """One line per diagnosed process and moment: the graded median of the diagnosed kind, then each variant's median
    per placement (us, ``a/b/c``)."""
    lines = []
    late = {(rep["repeat"], task): d for rep in repeats for task, d in (rep.get("late_diagnostics") or {}).items()}
    for row in rows:
        for moment, diag in (("early", row.get("diagnostics")), ("late", late.get((row["repeat"], row["task"])))):
            if not diag:
                continue
            variants = " ".join(_variant_text(name, v) for name, v in diag.items() if name != "info")
            kind = diag["info"].get("which", "eager")
            graded = row.get(f"{kind}_ms")
            lines.append(f"  {row['task']} r{row['repeat']} {moment:5s} pid {diag['info']['pid']}: graded {kind} "
                         f"{graded * 1e3 if graded else float('nan'):.2f} us | {variants}")
    return lines


def run_ours(tasks: list[Path], backend_name: str, solutions: Path, scratch: Path, concurrency: int,
             build_workers: int, on_row: Any, settings: Any = None,
             diagnose: frozenset[str] = frozenset(), diagnose_calls: int = 100, diagnose_placements: int = 3,
             diagnose_kind: str = "eager") -> dict[str, Any]:
    """One repeat over every task: one backend, ``concurrency`` tasks in flight; returns the repeat's figures.

    Tasks named in ``diagnose`` get :func:`diagnose_eager` right after their grade (the row's ``diagnostics``) and
    again once every task is graded (the figures' ``late_diagnostics``, by task): the repeat's wall time then
    includes them."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_agent.harness.evaluation.scheduling import DevicePool, EpisodeUsage, ScheduledBackend
    from cuda_agent.harness.tasks import load_task_file
    from cuda_agent.plugin_manager import PluginManager

    t_repeat = time.perf_counter()
    pm = PluginManager(load_entrypoints=False)
    harness = settings.harness.model_dump(mode="json", exclude_defaults=True) if settings else {}
    harness.setdefault("timing", {})["baseline_cache_dir"] = str(scratch / "baselines")
    backend = pm.registry.build("backend", backend_name, {"harness": harness})
    backend.experiments = settings.experiments if settings else None
    pool = DevicePool({0: backend}, build_workers)
    diagnosed: list[tuple[str, Any]] = []  # (task copy's name, its task) of the diagnosed rows

    def one(task_file: Path) -> dict[str, Any]:
        t0 = time.perf_counter()
        task = load_task_file(task_file, id=f"examples/{task_file.stem}")
        probe_s = time.perf_counter() - t0
        slot = pool.acquire()
        usage = EpisodeUsage()
        sb = ScheduledBackend(pool, slot, usage)
        try:
            ws = sb.prepare_workspace(task, scratch / "ws" / task_file.stem)
            copy_solution(ws.root, solutions / task_file.stem.split(COPY_MARK)[0])
            built = sb.compile(ws, task)
            result = sb.grade(ws, task) if built.status.value == "correct" else built
        finally:
            pool.release(slot)
        b = result.baselines
        diag = result.diagnostics
        baseline_host = diag.baseline_host or None  # the grade's own baseline batches (interfaces 3.3)
        diagnostics = None
        if base_task(task_file.stem) in diagnose and result.status.value != "error":
            diagnostics = diagnose_eager(backend, task, diagnose_calls, diagnose_placements, diagnose_kind)
        row = {
            "task": task_file.stem, "status": result.status.value, "probe_s": probe_s, "build_s": usage.build_s,
            "gpu_wait_s": usage.gpu_wait_s, "grade_s": usage.gpu_busy_s, "wall_s": time.perf_counter() - t0,
            "candidate_ms": result.timing.median_ms if result.timing else None,
            "eager_ms": b.eager.median_ms if b and b.eager else None,
            "compile_ms": b.compile.median_ms if b and b.compile else None,
            # What each median rests on (fastest call, IQR, calls): a shift of the whole distribution (the process)
            # tells apart from a tail (other work on the GPU or the host during some calls).
            "dispersion": {q: {"min_ms": t.min_ms, "iqr_ms": t.iqr_ms, "samples": t.samples}
                           for q, t in (("candidate", result.timing), ("eager", b.eager if b else None),
                                        ("compile", b.compile if b else None)) if t is not None},
            "spot_checks": diag.spot_checks, "isolation": result.isolation, "flags": result.flags,
            "phase_s": diag.phase_s, "transport": diag.transport,
            # The fresh-set calls (T12): their median, their neighbours', which samples the time is from, and the
            # first look where a gap made the grading pass look again.
            "fresh_sets": diag.fresh_sets.model_dump(exclude_none=True) if diag.fresh_sets else None,
            # Per baseline kind: timed calls whose host enqueue outlasted the pre-roll spin (a busy host in the time),
            # and on CUDA the allocator's retries (the baseline timed short of device memory).
            "baseline_host": baseline_host,
            # How the candidate's runner sized its pre-roll spin when it started (outside the device lock).
            "runner_spin": diag.runner_spin.model_dump() if diag.runner_spin else None,
        }
        if diagnostics is not None:
            row["diagnostics"] = diagnostics
            diagnosed.append((task_file.stem, task))
        return row

    late: dict[str, Any] = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as ex:
            for row in ex.map(one, tasks):
                on_row(row)
        for name, task in diagnosed:  # every task graded: the same processes again, the GPU otherwise idle
            late[name] = diagnose_eager(backend, task, diagnose_calls, diagnose_placements, diagnose_kind)
    finally:
        pool.close()
    wall = time.perf_counter() - t_repeat
    busy = sum(sl.busy_s for sl in pool.slots)
    out = {"tasks": len(tasks), "wall_s": wall, "device_busy_s": busy, "device_busy_share": busy / wall if wall else None}
    if diagnose:
        out["late_diagnostics"] = late
    return out


def run_reference(task_file: Path, backend_name: str, solution: Path, scratch: Path, profiles: int = 1) -> dict[str, Any]:
    """The reference method: compile, verify, profile as three fresh processes. ``profiles`` > 1: the profile step
    again in that many fresh processes in all (its own timing spread; the extra ones are not in ``wall_s``)."""
    from cuda_agent.harness.tasks import load_task_file
    from cuda_agent.plugin_manager import PluginManager

    task = load_task_file(task_file, id=f"examples/{task_file.stem}")
    backend = PluginManager(load_entrypoints=False).registry.build("backend", backend_name)
    ws = backend.prepare_workspace(task, scratch / "ref_ws")
    backend.close()
    copy_solution(ws.root, solution)
    out: dict[str, Any] = {"task": task_file.stem}
    total = 0.0

    def step_process(step: str) -> tuple[dict[str, Any] | None, str]:
        """One step of the reference method in a fresh process: (its JSON line, or None; its stderr's tail)."""
        proc = subprocess.run([sys.executable, str(CHILD), step, str(ws.root), str(scratch / "ref_build")],
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            return None, proc.stderr[-1500:]
        return json.loads(proc.stdout.strip().splitlines()[-1]), ""

    for step in ("compile", "verify", "profile"):
        t0 = time.perf_counter()
        got, err = step_process(step)
        dt = time.perf_counter() - t0
        total += dt
        out[f"{step}_s"] = dt
        if got is None:
            out["error"] = f"{step} failed: {err}"
            break
        out.update({k: v for k, v in got.items() if k != "step"})
    out["wall_s"] = total
    if "error" not in out and profiles > 1:
        out["extra_profiles"] = []
        for _ in range(profiles - 1):
            got, err = step_process("profile")
            if got is None:
                out["extra_profiles_error"] = err
                break
            out["extra_profiles"].append({q: got.get(q) for q in QUANTITIES})
    return out


def spread_text(worst: dict[str, Any]) -> str:
    """``0.0541 (conv2d_relu compile_ms)``, or why there is no figure."""
    if worst["spread"] is None:
        return "unknown (no task measured twice)"
    return f"{worst['spread']:.4f} ({worst['task']} {worst['quantity']})"


def base_task(name: str) -> str:
    """The example task a ``--copies`` task file was made from (``swish__copy2`` -> ``swish``)."""
    return name.split(COPY_MARK)[0]


def measurements(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every timing measurement in ``rows``: each row's own, plus a reference row's extra profile runs."""
    out = []
    for r in rows:
        out.append(r)
        out.extend({"task": r["task"], **extra} for extra in r.get("extra_profiles", []))
    return out


def max_spread(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Max over tasks and quantities of (max - min) / min of the medians of every measurement of that task: each
    repeat, and each copy (a copy is the same code measured by its own processes), and a reference row's extra
    profile runs. ``spread`` is None when no task was measured twice (a spread of one measurement is unknown, not 0)."""
    worst: dict[str, Any] = {"spread": None, "task": None, "quantity": None}
    rows = measurements(rows)
    for task in sorted({base_task(r["task"]) for r in rows}):
        for q in QUANTITIES:
            vals = [r[q] for r in rows if base_task(r["task"]) == task and r.get(q)]
            if len(vals) >= 2:
                worst["spread"] = worst["spread"] or 0.0
                s = (max(vals) - min(vals)) / min(vals)
                if s > worst["spread"]:
                    worst = {"spread": s, "task": task, "quantity": q, "values": vals}
    return worst


def summarize(rows: list[dict[str, Any]], repeats: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Throughput and spread; with ``repeats`` (ours) from the repeats' wall clocks, else from per-task walls."""
    # Every example solution is honest: a task not graded 'correct' (compile error, timeout...) means the
    # environment failed, and a throughput over failures is no figure at all.
    ok = [r for r in rows if "error" not in r and r.get("status", "correct") == "correct"]
    failed = [r for r in rows if r not in ok]
    out: dict[str, Any] = {"tasks_measured": len(ok), "failures": len(failed),
                           "max_median_spread": max_spread(ok), "per_task": rows}
    if failed:
        out.update({"tasks_per_gpu_hour": None, "mean_s_per_task": None,
                    "void": f"{len(failed)} of {len(rows)} tasks failed (first: {failed[0]['task']}: "
                            f"{failed[0].get('status') or failed[0].get('error', '')[:200]})"})
        if repeats:
            out["repeats"] = repeats
        return out
    if repeats:
        done = sum(r["tasks"] for r in repeats)
        wall = sum(r["wall_s"] for r in repeats)
        out.update({"repeats": repeats, "mean_s_per_task": wall / done if done else None,
                    "tasks_per_gpu_hour": 3600.0 * done / wall if wall else None})
    else:
        walls = [r["wall_s"] for r in ok]
        mean = statistics.fmean(walls) if walls else None
        out.update({"mean_s_per_task": mean, "tasks_per_gpu_hour": 3600.0 / mean if mean else None})
    return out


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
    ap.add_argument("--reference-tasks", default=None,
                    help="Comma-separated task names the reference method runs on (instead of --reference-limit), "
                    "e.g. the tasks whose spread is to be compared.")
    ap.add_argument("--reference-profiles", type=int, default=1,
                    help="Profile steps of the reference method per task and repeat, each a fresh process (>= 2: the "
                    "reference method's own timing spread; the extra ones are not counted in its throughput).")
    ap.add_argument("--concurrency", type=int, default=4, help="Tasks in flight in our evaluation (one GPU).")
    ap.add_argument("--build-workers", type=int, default=4, help="Builds at once in our evaluation.")
    ap.add_argument("--copies", type=int, default=1,
                    help="Score each task this many times per repeat as distinct tasks (own code hash, reference "
                    "process and baselines): enough tasks in flight to measure the steady state, not start-up.")
    ap.add_argument("--shared-inductor-cache", action="store_true",
                    help="Ours uses the machine's torch.compile (inductor) cache as it is, warm from any earlier run. "
                    "Default: a fresh cache folder per repeat, as the reference method compiles without a cache: a "
                    "second run on the same machine otherwise finds every compiled baseline cached (the eleventh "
                    "session's 10.9x ran so; the cold run before it read 9.3x).")
    add_settings_argument(ap)
    ap.add_argument("--diagnose", default="",
                    help="Comma-separated task names whose eager baseline is re-timed under protocol variants in a "
                    "diagnostics process of its own after its grade and at the repeat's end (issue 4's spread "
                    "diagnostics; the repeat's wall time then includes them).")
    ap.add_argument("--diagnose-calls", type=int, default=100, help="Timed calls per variant and placement of --diagnose.")
    ap.add_argument("--diagnose-placements", type=int, default=3,
                    help="Placements (new input sets and flush buffers) per variant of --diagnose.")
    ap.add_argument("--diagnose-kind", choices=("eager", "compile"), default="eager",
                    help="The baseline --diagnose re-times: eager, or torch.compile's (its spin variants tell whether "
                    "a compiled call's host path outlasts the pre-roll spin under load).")
    ap.add_argument("--out", default="eval_throughput.json", help="JSON output path.")
    args = ap.parse_args(argv)
    settings = load_settings(args.settings, ap)

    from rich.progress import Progress

    import torch

    tasks = sorted(p for p in Path(args.tasks).glob("*.py") if not p.name.startswith("_"))[: args.limit]
    solutions = REPO / "examples" / "solutions" / args.backend
    with_ref = not args.no_reference and args.backend == "cuda" and torch.cuda.is_available()
    ours_rows: list[dict[str, Any]] = []
    ours_repeats: list[dict[str, Any]] = []
    ref_rows: list[dict[str, Any]] = []
    ref_reps = args.repeats if args.reference_repeats is None else args.reference_repeats
    ref_tasks = tasks if args.reference_limit is None else tasks[: args.reference_limit]
    if args.reference_tasks:
        wanted = [t for t in args.reference_tasks.split(",") if t]
        unknown = sorted(set(wanted) - {t.stem for t in tasks})
        if unknown:
            ap.error(f"--reference-tasks: no such task {unknown}; tasks: {', '.join(t.stem for t in tasks)}")
        ref_tasks = [t for t in tasks if t.stem in wanted]
    diagnose = frozenset(t for t in args.diagnose.split(",") if t)
    if diagnose - {t.stem for t in tasks}:
        ap.error(f"--diagnose: no such task {sorted(diagnose - {t.stem for t in tasks})}; "
                 f"tasks: {', '.join(t.stem for t in tasks)}")
    t_start = time.perf_counter()

    def build_report(partial: bool) -> dict[str, Any]:
        ours = summarize(ours_rows, ours_repeats)
        ours["concurrency"] = args.concurrency
        ours["copies"] = args.copies
        ours["settings"] = settings.model_dump(mode="json", exclude_defaults=True)
        ours["inductor_cache"] = "shared" if args.shared_inductor_cache else "fresh per repeat"
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
        if with_ref and report["reference"]["tasks_per_gpu_hour"] and ours["tasks_per_gpu_hour"]:  # None when void
            report["speedup_vs_reference"] = ours["tasks_per_gpu_hour"] / report["reference"]["tasks_per_gpu_hour"]
        return report

    def record(rows: list[dict[str, Any]], row: dict[str, Any], who: str) -> None:
        """Keep ``row``, print one line, rewrite the JSON (a run cut short keeps every finished row)."""
        rows.append(row)
        print(f"[{time.perf_counter() - t_start:7.1f} s] {who:9s} {row['task']:15s} repeat {row['repeat']}: "
              f"{row['wall_s']:.1f} s {row.get('status') or row.get('error', '')[:80]}", flush=True)
        Path(args.out).write_text(json.dumps(build_report(partial=True), indent=2, default=str))

    with Progress(disable=not sys.stdout.isatty()) as progress, tempfile.TemporaryDirectory(prefix="eval-throughput-") as tmp:
        bar = progress.add_task("tasks x repeats", total=len(tasks) * max(1, args.copies) * args.repeats)
        for rep in range(args.repeats):
            scratch = Path(tmp) / f"r{rep}"
            scratch.mkdir(parents=True)
            if not args.shared_inductor_cache:  # inherited by every reference process of this repeat
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")

            def on_row(row: dict[str, Any], rep: int = rep) -> None:
                record(ours_rows, {**row, "repeat": rep}, "ours")
                progress.advance(bar)

            ours_tasks = task_copies(tasks, args.copies, scratch / "task_copies")
            rep_figures = run_ours(ours_tasks, args.backend, solutions, scratch, args.concurrency, args.build_workers, on_row,
                                   settings, diagnose, args.diagnose_calls, args.diagnose_placements, args.diagnose_kind)
            if not args.shared_inductor_cache:  # what compiled into this repeat's own cache (0: it was not used)
                rep_figures["inductor_cache_files"] = sum(1 for f in (scratch / "inductor").rglob("*") if f.is_file())
            ours_repeats.append({**rep_figures, "repeat": rep})
            print(f"[{time.perf_counter() - t_start:7.1f} s] ours      repeat {rep}: {rep_figures['tasks']} tasks in "
                  f"{rep_figures['wall_s']:.1f} s (device lock busy {rep_figures['device_busy_share']:.0%})", flush=True)
            Path(args.out).write_text(json.dumps(build_report(partial=True), indent=2, default=str))
            for task_file in tasks:
                if with_ref and rep < ref_reps and task_file in ref_tasks:
                    ref_scratch = scratch / "ref" / task_file.stem
                    ref_scratch.mkdir(parents=True)
                    row = run_reference(task_file, args.backend, solutions / task_file.stem, ref_scratch,
                                        args.reference_profiles)
                    record(ref_rows, {**row, "repeat": rep}, "reference")
    report = build_report(partial=False)
    ours = report["ours"]
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    host_lines = over_spin_lines(ours_rows)
    if host_lines:
        print("baseline calls whose host enqueue outlasted the pre-roll spin (calls over / timed, longest enqueue):")
        print("\n".join(host_lines))
    if diagnose:
        print("eager baseline under protocol variants, in each diagnosed reference process (median us):")
        print("\n".join(diagnostics_lines(ours_rows, ours_repeats)))
    print(f"ours: {ours['tasks_per_gpu_hour']} tasks/GPU-hour, max median spread {spread_text(ours['max_median_spread'])}"
          + (f"  VOID: {ours['void']}" if ours.get("void") else ""))
    if with_ref:
        r = report["reference"]
        print(f"reference: {r['tasks_per_gpu_hour']} tasks/GPU-hour, max median spread {spread_text(r['max_median_spread'])}"
              + (f"  VOID: {r['void']}" if r.get("void") else ""))
        for task in report["reference_tasks"]:  # like for like: the spread over the tasks both methods measured
            print(f"  {task}: spread ours {spread_text(max_spread([x for x in ours_rows if base_task(x['task']) == task]))}"
                  f", reference {spread_text(max_spread([x for x in ref_rows if x['task'] == task]))}")
        print(f"ratio: {report.get('speedup_vs_reference')}")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
