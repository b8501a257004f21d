"""What every KernelBench problem occupies, sized on the meta device: no GPU needed, nothing allocated (issue 21).

For each problem of the pinned KernelBench checkout (``.kernelbench``, ``scripts/fetch_kernelbench.sh``) the probe's
sandboxed child runs ``Model(*get_init_inputs())`` (on the CPU, moved to meta, where construction cannot run on meta)
and one forward on the meta device, as the harness does before it
lets a real probe allocate. From that footprint this script gives, per problem: bytes of one input set (inputs plus
outputs) and of the parameters, the smallest session (one set per side), and the set plan the memory budget would
choose on a device of ``--capacity-gib`` (default: an H200's 139.8 GiB at the budget's usable share), with the
forward's temporaries at the planner's guess before they are measured (twice the largest input or output). Problems the
meta device cannot run (``.item()``, data-dependent shapes) are listed with the reason: their real probe is sized by
its own run instead, so they are the ones to watch on the GPU. A plan that does not fit at the guess of the
temporaries is listed as ``too_large_at_the_guess``: on CUDA the probe measures them, and the planner uses that.

Usage::

    python benchmarks/kb_footprints.py --out results/kb_footprints.json                  # levels 1-3
    python benchmarks/kb_footprints.py --levels 1 --capacity-gib 70 --out /tmp/kb.json   # a smaller device
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: An H200's memory as torch reports it (GiB).
H200_GIB = 139.8


def size_problem(path: Path, capacity: int, wanted_sets: int, wanted_fresh: int) -> dict[str, Any]:
    """One problem's row: footprint, smallest session, the budget's plan (or why there is none)."""
    from cuda_agent.harness.memory_budget import Footprint, TooLarge, plan_sets, session_bytes
    from cuda_agent.harness.memory_plan import guessed_work_bytes
    from cuda_agent.harness.task_probe import TaskProbeError, size_on_meta

    row: dict[str, Any] = {"problem": f"{path.parent.name}/{path.stem}"}
    t0 = time.perf_counter()
    try:
        fp = size_on_meta(path.read_text(), source=row["problem"])
    except TaskProbeError as exc:
        row.update(method="error", kind=exc.kind, reason=str(exc)[:300])
        return row
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 2)
    if fp.get("method") != "meta":
        row.update(method=fp.get("method", "unavailable"), reason=fp.get("reason", ""))
        return row
    # Temporaries as the planner guesses them before anything has measured them.
    io = (int(fp["input_bytes"]), int(fp["output_bytes"]))
    footprint = Footprint(io[0], io[1], int(fp["param_bytes"]), work_bytes=guessed_work_bytes(*io))
    row.update(method="meta", input_bytes=footprint.input_bytes, output_bytes=footprint.output_bytes,
               param_bytes=footprint.param_bytes, set_bytes=footprint.set_bytes,
               smallest_session_bytes=session_bytes(footprint, "cuda", 1, 1, 0))
    try:
        plan = plan_sets(footprint, "cuda", capacity, wanted_sets=wanted_sets, wanted_fresh=wanted_fresh)
    except TooLarge:
        row["plan"] = "too_large"
        return row
    row["plan"] = {"reference_sets": plan.reference_sets, "runner_sets": plan.runner_sets,
                   "fresh_sets": plan.fresh_sets, "reserved_bytes": plan.reserved_bytes,
                   "constrained": plan.constrained}
    return row


def summarize(rows: list[dict[str, Any]], capacity: int) -> dict[str, Any]:
    """Counts per level: sized, by set size, constrained plans, too large, not sizable on meta."""
    gib = 2**30
    out: dict[str, Any] = {"capacity_bytes": capacity}
    for level in sorted({r["problem"].split("/")[0] for r in rows}):
        rs = [r for r in rows if r["problem"].startswith(level + "/")]
        meta = [r for r in rs if r["method"] == "meta"]
        out[level] = {
            "problems": len(rs),
            "sized_on_meta": len(meta),
            "set_ge_4gib": sum(r["set_bytes"] >= 4 * gib for r in meta),
            "set_ge_8gib": sum(r["set_bytes"] >= 8 * gib for r in meta),
            "largest_set_gib": round(max((r["set_bytes"] for r in meta), default=0) / gib, 2),
            "constrained_plans": sum(isinstance(r.get("plan"), dict) and r["plan"]["constrained"] for r in meta),
            # at the planner's guess of the temporaries; the CUDA probe measures them before the first session
            "too_large_at_the_guess": [r["problem"] for r in meta if r.get("plan") == "too_large"],
            "not_sizable_on_meta": {r["problem"]: r.get("reason", "")[:160] for r in rs if r["method"] != "meta"},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", type=Path, default=ROOT / ".kernelbench", help="the fetched KernelBench folder")
    ap.add_argument("--levels", default="1,2,3", help="comma list of levels (default 1,2,3)")
    ap.add_argument("--capacity-gib", type=float, default=None,
                    help="the device budget in GiB (default: an H200's memory at the budget's usable share)")
    ap.add_argument("--wanted-sets", type=int, default=5, help="sets a session uses (grading's verify sets)")
    ap.add_argument("--wanted-fresh", type=int, default=2, help="fresh sets staged at once")
    ap.add_argument("--out", type=Path, help="write rows and summary here as JSON")
    args = ap.parse_args(argv)
    from cuda_agent.harness.memory_budget import USABLE_SHARE

    base = args.kernelbench / "KernelBench"
    if not base.is_dir():
        print(f"error: {base} does not exist; run: bash scripts/fetch_kernelbench.sh [MIRROR]", file=sys.stderr)
        return 2
    capacity = int((args.capacity_gib if args.capacity_gib else H200_GIB * USABLE_SHARE) * 2**30)
    files = [p for level in args.levels.split(",") for p in sorted((base / f"level{level.strip()}").glob("*.py"),
                                                                     key=lambda p: (len(p.stem.split("_")[0]), p.stem))]
    rows = []
    for i, path in enumerate(files, 1):
        row = size_problem(path, capacity, args.wanted_sets, args.wanted_fresh)
        rows.append(row)
        size = f"{row['set_bytes'] / 2**30:7.2f} GiB" if row["method"] == "meta" else f"{row['method']:>11}"
        print(f"[{i:3d}/{len(files)}] {row['problem'][:60]:60s} {size} {row['seconds']:5.1f} s", flush=True)
    summary = summarize(rows, capacity)
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
        print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
