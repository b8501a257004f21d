"""Reports of ``cuda-agent tasks check``: ``report.json``, ``report.md`` and ``self_speedup.png``."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from cuda_agent.harness.suite_check import BAND, EXCLUSIVE_NOTE, INTEGRITY_NOTE, CheckRow, within_band
from cuda_agent.harness.suite_timeline import markdown_lines as timeline_lines
from cuda_agent.harness.suite_timeline import timeline


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f}"


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def summarize(rows: list[CheckRow], planned: int) -> dict[str, Any]:
    """Pass rate, status counts and the self-speedup figures over ``rows``."""
    by_status = Counter(r.status for r in rows)
    eager = [r.speedup_eager for r in rows if r.status == "correct" and r.speedup_eager is not None]
    ratio = [r.eager_over_compile for r in rows if r.eager_over_compile is not None]
    return {
        "planned": planned,
        "checked": len(rows),
        "by_status": dict(sorted(by_status.items())),
        "pass_rate": _r(by_status.get("correct", 0) / len(rows), 4) if rows else None,
        "median_self_speedup_eager": _r(statistics.median(eager), 4) if eager else None,
        "within_band_share": _r(sum(within_band(s) for s in eager) / len(eager), 4) if eager else None,
        "band": BAND,
        "median_eager_over_compile": _r(statistics.median(ratio), 4) if ratio else None,
        "outside_band": [r.task_id for r in rows if r.status == "correct" and not within_band(r.speedup_eager)],
        # outliers checked again alone (--recheck-outliers): the suite's self-speedup and the alone one
        "outliers_alone": {r.task_id: {"suite": _r(r.speedup_eager, 4), "alone": _r(r.alone.get("speedup_eager"), 4),
                                       "alone_status": r.alone.get("status")}
                           for r in rows if r.alone is not None},
        "not_passing": {r.task_id: f"{r.status}: {r.reason[:300]}" for r in rows if r.status != "correct"},
        "ran_alone": [r.task_id for r in rows if r.exclusive_retry],
        "fresh_sets_charged": [r.task_id for r in rows if "fresh_inputs_slower" in r.flags],
        "baselines_short_of_memory": {r.task_id: dict(r.baseline_alloc_retries) for r in rows
                                      if any(r.baseline_alloc_retries.values())},
        "device_steps": sorted({r.device_steps for r in rows if r.device_steps is not None}),
        # a suite resumed on other machines: its rows per device (rows from before devices were recorded: None)
        "devices": dict(Counter(r.device for r in rows if r.device is not None)),
        # the compile baseline compiled again inside a graded pass (on the critical path) though the warm-up compiled
        "recompiled_in_grade": [r.task_id for r in rows if r.baseline_prepare.get("compiles", 0) > 0
                                and not r.baseline_prepare.get("cold")],
        # ... or compiled it for the first time: the process warmed for the grade was gone (closed, retired)
        "compiled_cold_in_grade": [r.task_id for r in rows if r.baseline_prepare.get("cold")],
        "seconds": round(sum(r.seconds for r in rows), 1),
        # the grading passes' rounds: how many ran, and how many passes the precision stop ended ('standard_fast')
        "grade_rounds": _grade_rounds(rows),
        # where the suite's time goes (its whole run must fit two 10-minute device runs): per evaluator phase, and
        # the forward calls' part of it split into the runner's work and the round trip
        "phase_s": _totals(r.phase_s for r in rows),
        "call_work_s": _totals(r.call_work_s for r in rows),
        # per stage of a task: probe and warm-up run beside other tasks; 'device' is held by one task at a time
        "stage_s": _totals(r.stage_s for r in rows),
        # the runs laid out in time, the device floor (timed batches alone on the device) and the rest's estimate
        "timeline": timeline(rows, unchecked=max(0, planned - len(rows))),
    }


def _grade_rounds(rows: list[CheckRow]) -> dict[str, Any]:
    """Rows recording their grading pass's rounds (interfaces 3.7): 'rows', 'stopped_early' (the precision stop
    ended the pass before its most rounds) and 'rounds_run' (rows per count); empty when no row records them."""
    recorded = [r.grade_rounds for r in rows if r.grade_rounds.get("run") is not None]
    if not recorded:
        return {}
    return {"rows": len(recorded),
            "stopped_early": sum(g["run"] < (g.get("max") or g["run"]) for g in recorded),
            "rounds_run": dict(sorted(Counter(str(g["run"]) for g in recorded).items(), key=lambda kv: int(kv[0])))}


def _critical_path_note(held: float | None, steps: list[int]) -> str:
    """What the summed 'device' seconds mean for the suite's time, given the runs' ``eval.device_steps``."""
    if held is None:
        return ""
    if not steps:
        return f" (device_steps not recorded: {held} s of device is the critical path if graded parts ran one at a time)"
    if steps == [1]:
        return f" (graded parts one at a time: {held} s of device is the suite's critical path)"
    return (f" (eval.device_steps {', '.join(map(str, steps))}: graded parts overlapped, so the suite's critical path "
            f"is less than the {held} s of device summed)")


def _totals(dicts: Any) -> dict[str, float]:
    """Per key, the sum over ``dicts``, largest first."""
    total: Counter[str] = Counter()
    for d in dicts:
        total.update(d)
    return {k: round(v, 2) for k, v in total.most_common()}


def write_report(out_dir: Path, rows: list[CheckRow], *, planned: int, backend: str, tasks_spec: str) -> dict[str, Any]:
    """Write the three reports; returns what ``report.json`` holds."""
    out_dir = Path(out_dir)
    report = {"backend": backend, "tasks": tasks_spec, "note": INTEGRITY_NOTE, "summary": summarize(rows, planned),
              "rows": [r.model_dump(mode="json") for r in rows]}
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))
    (out_dir / "report.md").write_text(markdown(report, rows))
    report["plot"] = plot_histogram(out_dir / "self_speedup.png", rows)
    return report


def markdown(report: dict[str, Any], rows: list[CheckRow]) -> str:
    """The Markdown report: summary, then one table row per task (outliers and failures first)."""
    s = report["summary"]
    lines = [f"# Self-check of `{report['tasks']}` on `{report['backend']}`", "", f"> {report['note']}", "",
             f"- checked: {s['checked']} of {s['planned']}; by status: "
             + ", ".join(f"{k} {v}" for k, v in s["by_status"].items()),
             f"- pass rate: {s['pass_rate']}",
             f"- median self-speedup vs eager: {s['median_self_speedup_eager']} (should be ~1.00); within "
             f"+-{int(BAND * 100)}%: {s['within_band_share']}",
             f"- median eager/compile ratio (reported, not targeted): {s['median_eager_over_compile']}",
             f"- task seconds in all: {s['seconds']}"]
    if s.get("devices"):
        lines.append("- rows per device: " + ", ".join(f"{k} {v}" for k, v in s["devices"].items())
                     + (" (the self-speedups compare within a device; statuses across them)" if len(s["devices"]) > 1
                        else ""))
    if s.get("grade_rounds"):
        g = s["grade_rounds"]
        lines.append(f"- grading passes the precision stop ended early: {g['stopped_early']} of {g['rows']}; rows by "
                     "rounds run: " + ", ".join(f"{k}: {v}" for k, v in g["rounds_run"].items()))
    if s.get("phase_s"):
        top = list(s["phase_s"].items())[:6]
        lines.append("- seconds per phase, summed over tasks (largest): " + ", ".join(f"{k} {v}" for k, v in top))
    if s.get("stage_s"):
        lines.append("- seconds per stage, summed over tasks: " + ", ".join(f"{k} {v}" for k, v in s["stage_s"].items())
                     + _critical_path_note(s["stage_s"].get("device"), s.get("device_steps") or []))
    if s.get("call_work_s"):
        lines.append("- the forward calls' seconds: " + ", ".join(f"{k} {v}" for k, v in s["call_work_s"].items()))
    lines.append("")
    if s.get("timeline"):
        lines += timeline_lines(s["timeline"])
    if s["not_passing"]:
        lines += ["## Not passing", ""] + [f"- `{k}`: {v}" for k, v in s["not_passing"].items()] + [""]
    if s["ran_alone"]:
        lines += ["## Ran alone after an out-of-memory error", "", f"{EXCLUSIVE_NOTE}: status `(alone)` below.", ""]
        lines += [f"- `{k}`" for k in s["ran_alone"]] + [""]
    if s.get("outliers_alone"):
        lines += ["## Outliers checked again alone", "", "Tasks outside the band in the suite, checked once more with "
                  "nothing else on the device (`--recheck-outliers`): back in the band alone points at the concurrent "
                  "run, still out at the task or the harness's data path. Self-speedup vs eager:", ""]
        lines += [f"- `{k}`: suite {v['suite']}, alone {v['alone']}"
                  + (f" ({v['alone_status']})" if v["alone_status"] != "correct" else "")
                  for k, v in s["outliers_alone"].items()] + [""]
    if s.get("baselines_short_of_memory"):
        lines += ["## Baselines timed short of device memory", "", "The reference's caching allocator retried "
                  "cudaMalloc inside a baseline's timed batch (after freeing its cached blocks): the baseline paid for "
                  "allocations inside its calls and reads slower than it runs with room, so the self-speedup (and any "
                  "candidate's speed-up) on these tasks reads too high. Retries per baseline kind:", ""]
        lines += [f"- `{k}`: " + ", ".join(f"{kind} {n}" for kind, n in v.items())
                  for k, v in s["baselines_short_of_memory"].items()] + [""]
    if s.get("recompiled_in_grade"):
        lines += ["## Compile baseline compiled again inside the graded pass", "", "TorchDynamo compiled frames "
                  "when the graded pass prepared the compile baseline, after the warm-up had compiled it: seconds on "
                  "the suite's critical path (each row's `baseline_prepare`).", ""]
        lines += [f"- `{k}`" for k in s["recompiled_in_grade"]] + [""]
    if s.get("compiled_cold_in_grade"):
        lines += ["## Compile baseline compiled afresh inside the graded pass", "", "The graded pass ran in a "
                  "reference process that had compiled nothing: the one its warm-up compiled in was gone (closed "
                  "under memory pressure, or retired), so the compile ran on the suite's critical path.", ""]
        lines += [f"- `{k}`" for k in s["compiled_cold_in_grade"]] + [""]
    if s["fresh_sets_charged"]:
        lines += ["## Charged their fresh-set calls", "", "The task's own `Model` ran slower on never-seen input sets "
                  "in two looks, and only those calls were its time (`fresh_inputs_slower`): it has no cache, so "
                  "this is the harness's own gap to explain (each row's `fresh_sets` has both looks).", ""]
        lines += [f"- `{k}`" for k in s["fresh_sets_charged"]] + [""]
    lines += ["## Tasks", "", "| task | status | GiB/set | sets ref/runner | self vs eager | self vs compile | "
              "eager/compile | s |", "|---|---|---|---|---|---|---|---|"]

    def order(r: CheckRow) -> tuple[int, float]:
        off = abs((r.speedup_eager or 1.0) - 1.0)
        return (0 if r.status != "correct" else 1 if off > BAND else 2, -off)

    for r in sorted(rows, key=order):
        sets = "-" if r.reference_sets is None else f"{r.reference_sets}/{r.runner_sets}"
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        status = f"{r.status} (alone)" if r.exclusive_retry else r.status
        lines.append(f"| {r.task_id} | {status} | {_gib(r.bytes_per_set)} | {sets} | {fmt(r.speedup_eager)} | "
                     f"{fmt(r.speedup_compile)} | {fmt(r.eager_over_compile)} | {r.seconds:.1f} |")
    return "\n".join(lines) + "\n"


def plot_histogram(path: Path, rows: list[CheckRow]) -> str | None:
    """A histogram of the self-speedups vs eager with the +-band marked; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    values = [r.speedup_eager for r in rows if r.status == "correct" and r.speedup_eager is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    if values:
        lo, hi = min(min(values), 1 - 2 * BAND), max(max(values), 1 + 2 * BAND)
        ax.hist(values, bins=40, range=(lo, hi), color="#4477aa", edgecolor="white")
    ax.axvline(1.0, color="black", linewidth=1)
    for edge in (1 - BAND, 1 + BAND):
        ax.axvline(edge, color="#cc3311", linestyle="--", linewidth=1)
    ax.set_xlabel("self-speedup vs eager (the task's own Model as the candidate)")
    ax.set_ylabel("tasks")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"{len(values)} tasks; dashed: +-{int(BAND * 100)}%")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
