"""What handing a fresh set over costs inside the device lock, per ``ExperimentSettings.fresh_set_transport`` (issue 4).

A profile's timing batch calls the candidate on ``fresh_set_calls`` sets it has never seen (harness/fresh_sets.py),
each handed to its process just before its call, inside the device lock. With 'files' the reference writes the set
into slot files then (device-to-host, file write) and the runner reads them back; with 'descriptors' the set was
staged before the batch (memory files, or device allocations on CUDA with the 'vmm' transport) and only its
descriptors pass at the call. On the H200 the file path cost ~95 ms per set over the five example tasks (session 11),
7 s of an 80 s evaluation.

For each example task and mode: the honest solution compiled once, profiled ``--profiles`` times; per set, the
hand-over (inside the lock) and the staging (outside it), with the candidate's median as a check that nothing
else moved. Prints a table, writes JSON.

Usage::

    python benchmarks/fresh_hand_over.py --backend cuda --out results/fresh_hand_over.json
    python benchmarks/fresh_hand_over.py --backend cpu --tasks swish,row_sum --profiles 2   # the machinery on CPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from _settings import BenchmarkSettings, make_backend  # noqa: E402
from env_latency import TASKS, _task, _workspace  # noqa: E402

MODES = ("files", "descriptors")


def measure(backend, kind: str, name: str, mode: str, profiles: int, scratch: Path) -> dict:  # type: ignore[no-untyped-def]
    """One task in one mode: per-profile hand-over and staging per set, fallbacks, the candidate's median."""
    task = _task(name, kind)
    ws = _workspace(backend, task, name, kind, scratch / f"{name}-{mode}")
    built = backend.compile(ws, task)
    if not built.passed:
        raise SystemExit(f"{name}: compile failed: {built.summary_for_agent()}")
    rows = []
    for _ in range(profiles):
        t0 = time.perf_counter()
        result = backend.profile(ws, task)
        if not result.passed:
            raise SystemExit(f"{name} ({mode}): profile failed: {result.summary_for_agent()}")
        diag = result.diagnostics
        phases = diag.phase_s
        sets = diag.fresh_hand_overs or 1
        rows.append({
            "profile_s": time.perf_counter() - t0,
            "sets": sets,
            "hand_over_ms_per_set": 1e3 * phases.get("fresh_hand_over", 0.0) / sets,
            "staging_ms_per_set": 1e3 * phases.get("fresh_sets", 0.0) / sets,
            "fallbacks": len(diag.fresh_set_fallbacks),
            "candidate_ms": result.timing.median_ms if result.timing else None,
            "transport": diag.transport,
        })
    return {
        "runs": rows,
        "hand_over_ms_per_set": statistics.median(r["hand_over_ms_per_set"] for r in rows),
        "staging_ms_per_set": statistics.median(r["staging_ms_per_set"] for r in rows),
        "fallbacks": sum(r["fallbacks"] for r in rows),
        "candidate_ms": statistics.median(r["candidate_ms"] for r in rows if r["candidate_ms"] is not None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated example tasks (default: {','.join(TASKS)})")
    ap.add_argument("--profiles", type=int, default=3, help="profiles per task and mode (default 3)")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "fresh_hand_over.json")
    args = ap.parse_args()
    names = [t for t in args.tasks.split(",") if t]
    unknown = sorted(set(names) - set(TASKS))
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; valid: {', '.join(TASKS)}")
    out: dict = {"backend": args.backend, "profiles": args.profiles, "tasks": {}}
    with tempfile.TemporaryDirectory(prefix="fresh-hand-over-") as tmp:
        for mode in MODES:  # one backend per mode (its processes and baseline cache serve every task)
            backend = make_backend(args.backend, BenchmarkSettings(experiments={"fresh_set_transport": mode}))
            try:
                for name in names:
                    figures = measure(backend, args.backend, name, mode, args.profiles, Path(tmp))
                    out["tasks"].setdefault(name, {})[mode] = figures
                    print(f"{name:16s} {mode:12s} hand-over {figures['hand_over_ms_per_set']:8.2f} ms/set  staging "
                          f"{figures['staging_ms_per_set']:8.2f} ms/set  fallbacks {figures['fallbacks']}  candidate "
                          f"{figures['candidate_ms']:.4f} ms", flush=True)
            finally:
                backend.close()
    for mode in MODES:
        out[f"{mode}_hand_over_ms_per_set"] = statistics.mean(t[mode]["hand_over_ms_per_set"] for t in out["tasks"].values())
    print(f"mean hand-over per set: files {out['files_hand_over_ms_per_set']:.2f} ms, descriptors "
          f"{out['descriptors_hand_over_ms_per_set']:.2f} ms")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
