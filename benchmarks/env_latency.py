"""Per-turn tool latency of our environment vs the reference method, and timing spread (issue 3).

Measures, on one example task and its honest solution:

1. **ours**: compile -> verify -> profile through the backend (incremental ninja, shared binding
   object, pre-started sandboxed processes, cached baselines) after (a) a `.cu`-only edit and
   (b) a binding edit; medians over ``--repeats`` turns, baselines warmed first.
2. **reference** (ANCHORS.md): full rebuild with torch.utils.cpp_extension, verification and
   profiling each in a fresh process, torch.compile per profile (``_reference_method.py``); its
   per-turn total must land within +-20% of ANCHORS' 55-60 s for the ratio to count.
3. **timing spread**: every example task's honest solution profiled 5 times; the spread of the
   candidate medians, max over tasks (target <= 1%).

Usage (on the H200)::

    python benchmarks/env_latency.py --backend cuda --task swish --out results/env_latency.json

``--backend cpu`` runs the same machinery on a CPU machine (no targets there).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.progress import track

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _settings import add_settings_argument, load_settings, make_backend  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TASKS = ["swish", "row_sum", "softmax", "gemm_bias_relu", "conv2d_relu"]
ANCHOR_TURN_S = (55.0, 60.0)


def _shortcuts(preroll_us: float | None, min_timing_s: float | None, net_overhead: bool | None) -> list[str]:
    """The ``-o`` overrides the shortcut flags stand for (unset flags keep the preset's values)."""
    given = {"experiments.timing.timer.preroll_us": preroll_us, "experiments.timing.min_batch_s": min_timing_s,
             "experiments.timing.net_overhead": net_overhead}
    return [f"{k}={json.dumps(v)}" for k, v in given.items() if v is not None]


def _task(name: str, kind: str):
    from cuda_agent.harness.tasks import load_task_code, load_task_file

    if name.startswith("kernelbench:"):  # one KernelBench problem, at its full size on cuda (reduced on cpu)
        from urllib.parse import parse_qs, urlsplit

        from cuda_agent.harness.evaluation.task_sources import iter_kernelbench

        spec = urlsplit(name.removeprefix("kernelbench:"))
        q = {k: v[0] for k, v in parse_qs(spec.query).items()}
        found = list(iter_kernelbench(Path(spec.path), q.get("levels", "1,2,3"), q.get("ids"),
                                      "reduced" if kind == "cpu" else q.get("sizes", "full")))
        if len(found) != 1:
            raise SystemExit(f"--task {name} names {len(found)} problems; give one (levels=L&ids=N)")
        t = found[0]
        probed = load_task_code(t.code, t.id, source=t.source, level=t.level, device="cuda" if kind == "cuda" else "cpu")
        return probed.model_copy(update={"name": t.name, "meta": {**t.meta, **probed.meta}})
    path = REPO / "examples" / "tasks" / f"{name}.py"
    return load_task_file(path, id=f"examples/{name}", sizes="cpu" if kind == "cpu" else "full", device="cuda" if kind == "cuda" else "cpu")


def _solution(name: str, kind: str, task) -> Path:  # type: ignore[no-untyped-def]
    """The honest solution of an example task, or of a KernelBench problem (the registry convention's)."""
    if name.startswith("kernelbench:"):
        return REPO / "examples" / "solutions" / "kernelbench" / "registry" / kind / task.name
    return REPO / "examples" / "solutions" / kind / name


def _workspace(backend, task, name: str, kind: str, root: Path):
    ws = backend.prepare_workspace(task, root)
    sol = _solution(name, kind, task)
    for p in sorted(sol.rglob("*")):
        if p.is_file():
            ws.write(str(p.relative_to(sol)), p.read_text())
    return ws


def _touch(ws, rel: str, n: int) -> None:
    ws.write(rel, ws.read(rel).rstrip("\n").split("\n// edit ")[0] + f"\n// edit {n}\n")


def our_turns(backend, task, ws, kernel_rel: str, binding_rel: str, repeats: int) -> dict:
    """Median per-step and per-turn latency after a kernel-only edit and after a binding edit."""
    # Warm: first build (binding object), pool start, baselines measured and cached.
    for step in (backend.compile, backend.verify, backend.profile):
        result = step(ws, task)
        if not result.passed:
            raise SystemExit(f"warm-up {result.phase} failed: {result.summary_for_agent()}")
    out = {}
    counter = 0
    for label, rel in (("kernel_edit", kernel_rel), ("binding_edit", binding_rel)):
        rows = []
        for _ in track(range(repeats), description=f"ours: {label}"):
            counter += 1
            _touch(ws, rel, counter)
            row = {}
            t_turn = time.perf_counter()
            for step in (backend.compile, backend.verify, backend.profile):
                t0 = time.perf_counter()
                result = step(ws, task)
                row[result.phase] = time.perf_counter() - t0
                if result.diagnostics.phase_s:  # where the step's time went (evaluator sub-phases)
                    row[f"{result.phase}_parts"] = result.diagnostics.phase_s
                if result.phase == "compile":
                    row["steps"] = result.diagnostics.build.steps if result.diagnostics.build else None
                if not result.passed:
                    raise SystemExit(f"{label}: {result.phase} failed: {result.summary_for_agent()}")
            row["turn"] = time.perf_counter() - t_turn
            rows.append(row)
        parts = {}
        for step in ("verify", "profile"):
            names = sorted({n for r in rows for n in r.get(f"{step}_parts", {})})
            parts[step] = {n: statistics.median(r.get(f"{step}_parts", {}).get(n, 0.0) for r in rows) for n in names}
        out[label] = {
            "median_parts_s": parts,
            "median_s": {k: statistics.median(r[k] for r in rows) for k in ("compile", "verify", "profile", "turn")},
            "steps": [r["steps"] for r in rows],
            "runs": rows,
        }
    return out


def reference_turns(ws_root: Path, device: str, repeats: int) -> dict:
    """The reference method's per-turn latency: three fresh processes, full rebuild."""
    script = Path(__file__).with_name("_reference_method.py")
    rows = []
    for _ in track(range(repeats), description="reference method"):
        build = Path(tempfile.mkdtemp(prefix="refbuild-"))
        row = {}
        t_turn = time.perf_counter()
        for step in ("compile", "verify", "profile"):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, str(script), step, str(ws_root), str(build), device], capture_output=True, text=True
            )
            row[step] = time.perf_counter() - t0
            if proc.returncode != 0:
                raise SystemExit(f"reference {step} failed:\n{proc.stderr[-3000:]}")
            row[f"{step}_report"] = json.loads(proc.stdout.strip().splitlines()[-1])
        row["turn"] = time.perf_counter() - t_turn
        shutil.rmtree(build, ignore_errors=True)
        rows.append(row)
    med = {k: statistics.median(r[k] for r in rows) for k in ("compile", "verify", "profile", "turn")}
    lo, hi = ANCHOR_TURN_S
    valid = lo * 0.8 <= med["turn"] <= hi * 1.2
    return {"median_s": med, "runs": rows, "within_anchor_band": valid, "anchor_turn_s": list(ANCHOR_TURN_S)}


def timing_spread(backend, kind: str, tasks: list[str], times: int, base: Path, on_task=None) -> dict:
    """Each task's honest solution profiled ``times`` times; spread of the candidate medians.

    ``on_task(partial)`` is called after every task with the figures so far (a run cut short keeps them).
    """
    out = {}
    for name in tasks:
        t0 = time.perf_counter()
        task = _task(name, kind)
        ws = _workspace(backend, task, name, kind, base / f"spread-{name}")
        medians, eager, profiles = [], None, []
        for _ in track(range(times), description=f"spread: {name}"):
            t_profile = time.perf_counter()
            result = backend.profile(ws, task)
            if not result.passed or result.timing is None:
                raise SystemExit(f"spread {name}: profile failed: {result.summary_for_agent()}")
            medians.append(result.timing.median_ms)
            tm = result.timing
            # Per profile: what the median rests on (calls, its CI, min and IQR), to tell sampling noise from a
            # shift between processes.
            profiles.append({"median_ms": tm.median_ms, "min_ms": tm.min_ms, "iqr_ms": tm.iqr_ms, "rel_ci": tm.rel_ci,
                             "samples": tm.samples, "seconds": time.perf_counter() - t_profile,
                             "overhead_ms": result.diagnostics.timing_overhead_ms})
            if result.baselines and result.baselines.eager:
                eager = result.baselines.eager.median_ms
        spread = (max(medians) - min(medians)) / min(medians)
        out[name] = {"medians_ms": medians, "spread": spread, "eager_ms": eager, "profiles": profiles,
                     "seconds": time.perf_counter() - t0}
        if on_task is not None:
            on_task({"tasks": out, "max_spread": max(v["spread"] for v in out.values()), "partial": True})
    return {"tasks": out, "max_spread": max(v["spread"] for v in out.values())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--task", default="swish",
                        help=f"An example task ({', '.join(TASKS)}) or one KernelBench problem, e.g. "
                        "'kernelbench:.kernelbench?levels=1&ids=19' (its registry-convention honest solution).")
    parser.add_argument("--repeats", type=int, default=5, help="Turns per edit kind (ours).")
    parser.add_argument("--reference-repeats", type=int, default=2, help="Turns of the reference method.")
    parser.add_argument("--spread-times", type=int, default=5, help="Profiles per task for the spread figure.")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--skip-spread", action="store_true")
    parser.add_argument("--preroll-us", type=float, default=None,
                        help="experiments.timing.timer.preroll_us for our environment (0 = launch latency inside the "
                        "events); default: the preset's (200 on cuda).")
    parser.add_argument("--min-timing-s", type=float, default=None,
                        help="experiments.timing.min_batch_s (sample at least this long per timed batch).")
    parser.add_argument("--net-overhead", action="store_true", default=None,
                        help="experiments.timing.net_overhead: times net of the protocol's per-process cost.")
    add_settings_argument(parser)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write.")
    args = parser.parse_args()
    overrides = args.settings + _shortcuts(args.preroll_us, args.min_timing_s, args.net_overhead)
    settings = load_settings(overrides, parser)
    from cuda_agent.harness.timing_protocol import resolve_protocol

    protocol = resolve_protocol(settings.harness.timing.preset, args.backend, settings.experiments.timing)
    backend = make_backend(args.backend, settings)
    base = Path(tempfile.mkdtemp(prefix="env-latency-"))
    report: dict = {"backend": args.backend, "task": args.task, "device": backend.device_facts(),
                    "preroll_us": protocol.timer.preroll_us, "timing_protocol": protocol.model_dump(),
                    "timing_cpus": settings.experiments.timing_cpus, "settings_overrides": overrides}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every phase, so a run cut short still leaves what it measured
        args.out.write_text(json.dumps(report, indent=2, default=str))
        done = [k for k in ("ours", "reference", "spread") if k in report]
        print(f"saved {args.out} ({', '.join(done) or 'device facts'})", flush=True)

    try:
        task = _task(args.task, args.backend)
        ws = _workspace(backend, task, args.task, args.backend, base / "ours")
        if args.task not in TASKS and not args.task.startswith("kernelbench:"):
            raise SystemExit(f"--task {args.task!r}: valid are {', '.join(TASKS)} or kernelbench:PATH?levels=L&ids=N")
        suffix = ".cu" if args.backend == "cuda" else ".cpp"
        sol = _solution(args.task, args.backend, task)
        kernel = next(p for p in sorted((sol / "kernels").glob(f"*{suffix}")) if not p.stem.endswith("_binding"))
        binding = next(iter(sorted((sol / "kernels").glob("*_binding.cpp"))))
        report["ours"] = our_turns(backend, task, ws, f"kernels/{kernel.name}", f"kernels/{binding.name}", args.repeats)
        save()
        if not args.skip_reference:
            device = "cuda" if args.backend == "cuda" else "cpu"
            report["reference"] = reference_turns(Path(ws.root), device, args.reference_repeats)
            ref_turn = report["reference"]["median_s"]["turn"]
            report["speedup_vs_reference"] = {
                label: ref_turn / report["ours"][label]["median_s"]["turn"] for label in ("kernel_edit", "binding_edit")
            }
            report["ratio_valid"] = report["reference"]["within_anchor_band"]
            save()
        if not args.skip_spread:
            def keep(partial: dict) -> None:
                report["spread"] = partial
                save()

            report["spread"] = timing_spread(backend, args.backend, TASKS, args.spread_times, base, on_task=keep)
    finally:
        t_close = time.perf_counter()
        backend.close()
        shutil.rmtree(base, ignore_errors=True)
        report["close_s"] = time.perf_counter() - t_close
    save()
    for label in ("kernel_edit", "binding_edit"):
        med = report["ours"][label]["median_s"]
        print(f"ours {label:13s} compile {med['compile']:.2f} s  verify {med['verify']:.2f} s  "
              f"profile {med['profile']:.2f} s  turn {med['turn']:.2f} s  (steps {report['ours'][label]['steps']})")
        for step, parts in report["ours"][label].get("median_parts_s", {}).items():
            print(f"    {step}: " + "  ".join(f"{n} {v:.3f}" for n, v in parts.items()))
    if "reference" in report:
        med = report["reference"]["median_s"]
        print(f"reference     compile {med['compile']:.2f} s  verify {med['verify']:.2f} s  profile {med['profile']:.2f} s  "
              f"turn {med['turn']:.2f} s  (within ANCHORS band: {report['reference']['within_anchor_band']})")
        for label, x in report["speedup_vs_reference"].items():
            print(f"speedup {label}: {x:.1f}x")
    if "spread" in report:
        for name, row in report["spread"]["tasks"].items():
            calls = [p["samples"] for p in row.get("profiles", [])]
            print(f"spread {name:15s} {row['spread'] * 100:.2f}%  medians {['%.4f' % m for m in row['medians_ms']]} ms  "
                  f"calls {calls}  eager {row['eager_ms']}")
        print(f"max spread: {report['spread']['max_spread'] * 100:.2f}%")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
