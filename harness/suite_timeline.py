"""Where a self-check suite's wall time went: its runs laid out from the rows' start times, and the device floor.

The KernelBench suite has to fit two 10-minute device runs. Each row records when its check started
(:attr:`~cuda_agent.harness.suite_check.CheckRow.started_at`), how long it took, and how long its timed batches held
the device alone (``device_lock['exclusive_s']``). Timed batches exclude each other whatever the concurrency, so
their sum is the floor of the suite's time at this timing protocol; the rest (probes, warm-ups, checks, set making)
can overlap. :func:`timeline` compares each run's span with that floor: a run far above its floor is bound by
something the scheduler could overlap better; one close to it is bound by the protocol's timed calls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

#: A row starting more than this many seconds after every earlier row of its run had ended starts a new run (a
#: resume in a later device call).
RUN_GAP_S = 120.0


def _end(row: Any) -> float:
    return row.started_at + row.seconds


def split_runs(rows: Sequence[Any], gap_s: float = RUN_GAP_S) -> list[list[Any]]:
    """The rows that have a start time, grouped into runs (in start order)."""
    timed = sorted((r for r in rows if r.started_at is not None), key=lambda r: r.started_at)
    runs: list[list[Any]] = []
    end = float("-inf")
    for row in timed:
        if not runs or row.started_at > end + gap_s:
            runs.append([])
            end = float("-inf")
        runs[-1].append(row)
        end = max(end, _end(row))
    return runs


def describe_run(rows: Sequence[Any]) -> dict[str, Any]:
    """One run: when it started, its span, tasks, seconds per task, the tasks in flight on average, and the seconds
    its timed batches held the device alone (and that share of the span)."""
    start = min(r.started_at for r in rows)
    span = max(_end(r) for r in rows) - start
    exclusive = sum(r.device_lock.get("exclusive_s", 0.0) for r in rows)
    waited = sum(r.device_lock.get("exclusive_wait_s", 0.0) for r in rows)
    return {
        "started": dt.datetime.fromtimestamp(start, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "tasks": len(rows),
        "span_s": round(span, 1),
        "seconds_per_task": round(span / len(rows), 2),
        "in_flight": round(sum(r.seconds for r in rows) / span, 2) if span > 0 else None,
        "exclusive_s": round(exclusive, 1),
        "exclusive_share": round(exclusive / span, 3) if span > 0 else None,
        "exclusive_wait_s": round(waited, 1),
        "lock_recorded": sum(1 for r in rows if r.device_lock),
    }


def timeline(rows: Sequence[Any], unchecked: int = 0) -> dict[str, Any]:
    """The runs of ``rows`` (:func:`describe_run`), the device floor (the timed batches' exclusive seconds summed
    over every row that recorded them, and per task on average), the baselines' retakes, and for ``unchecked``
    tasks still to check the seconds they would take at the last run's pace and at the floor's."""
    runs = [describe_run(run) for run in split_runs(rows)]
    locked = [r for r in rows if r.device_lock]
    floor = sum(r.device_lock.get("exclusive_s", 0.0) for r in locked)
    retakes: dict[str, dict[str, float]] = {}
    for r in rows:
        for kind, host in r.baseline_host.items():
            total = retakes.setdefault(kind, {"calls": 0, "over_spin": 0, "retakes": 0, "spin_blocked": 0})
            for k in total:
                total[k] += host.get(k, 0)
    per_task = floor / len(locked) if locked else None
    out: dict[str, Any] = {
        "runs": runs,
        "exclusive_s": round(floor, 1),
        "exclusive_per_task_s": round(per_task, 2) if per_task is not None else None,
        "rows_with_lock_record": len(locked),
        "baseline_retakes": retakes,
    }
    if unchecked and runs:
        out["unchecked"] = unchecked
        out["unchecked_at_last_pace_s"] = round(unchecked * runs[-1]["seconds_per_task"], 0)
        if per_task is not None:
            out["unchecked_floor_s"] = round(unchecked * per_task, 0)
    return out


def markdown_lines(t: dict[str, Any]) -> list[str]:
    """The report's section on the suite's time (empty when no row has a start time)."""
    if not t["runs"]:
        return []
    lines = ["## Where the suite's time goes", "",
             "Each run laid out from its rows' start times. `alone`: seconds the timed batches held the device to "
             "themselves (timed batches exclude each other at any concurrency, so their sum is the floor of a run "
             "at this timing protocol; the rest can overlap).", "",
             "| run started | tasks | span s | s per task | in flight | alone s | alone share |",
             "|---|---|---|---|---|---|---|"]
    for run in t["runs"]:
        alone = "-" if not run["lock_recorded"] else run["exclusive_s"]
        share = "-" if not run["lock_recorded"] or run["exclusive_share"] is None else run["exclusive_share"]
        lines.append(f"| {run['started']} | {run['tasks']} | {run['span_s']} | {run['seconds_per_task']} | "
                     f"{run['in_flight']} | {alone} | {share} |")
    lines.append("")
    if t["rows_with_lock_record"]:
        lines.append(f"- timed batches alone on the device: {t['exclusive_s']} s over {t['rows_with_lock_record']} "
                     f"rows, {t['exclusive_per_task_s']} s per task")
    if t.get("unchecked"):
        est = f"- {t['unchecked']} tasks unchecked: about {t['unchecked_at_last_pace_s']:.0f} s at the last run's pace"
        if "unchecked_floor_s" in t:
            est += f", at least {t['unchecked_floor_s']:.0f} s of timed batches"
        lines.append(est)
    for kind, v in t["baseline_retakes"].items():
        if v["calls"]:
            lines.append(f"- {kind} baseline: {int(v['retakes'])} retakes and {int(v['over_spin'])} calls over the "
                         f"spin in {int(v['calls'])} timed calls"
                         + (f", {int(v['spin_blocked'])} timed behind the base spin (host waits for the device)"
                            if v.get("spin_blocked") else ""))
    return lines + [""]
