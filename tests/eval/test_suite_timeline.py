"""The self-check report's timeline: runs split at gaps, their spans against the timed batches' floor."""

from __future__ import annotations

from cuda_agent.harness.suite_check import CheckRow
from cuda_agent.harness.suite_timeline import describe_run, markdown_lines, split_runs, timeline


def row(task: str, start: float | None, seconds: float, alone: float | None = None, **kw: object) -> CheckRow:
    lock = {} if alone is None else {"exclusive_s": alone, "exclusive_wait_s": 1.0, "exclusive_takes": 6.0}
    return CheckRow(task_id=task, status="correct", started_at=start, seconds=seconds, device_lock=lock, **kw)


def test_rows_split_into_runs_where_nothing_ran_for_a_while_and_each_run_is_laid_out() -> None:
    t0 = 1_780_000_000.0
    first = [row("a", t0, 50, 5), row("b", t0 + 1, 60, 7), row("c", t0 + 55, 40, 3)]  # ends at t0 + 95
    second = [row("d", t0 + 3600, 20, 2), row("e", t0 + 3601, 30, None)]  # a resume an hour later
    rows = second[::-1] + first + [row("old", None, 9)]  # order does not matter; no start time: left out
    runs = split_runs(rows)
    assert [[r.task_id for r in run] for run in runs] == [["a", "b", "c"], ["d", "e"]]
    one = describe_run(runs[0])
    assert one["tasks"] == 3 and one["span_s"] == 95.0 and one["seconds_per_task"] == round(95 / 3, 2)
    assert one["in_flight"] == round(150 / 95, 2) and one["exclusive_s"] == 15.0
    assert one["exclusive_share"] == round(15 / 95, 3) and one["exclusive_wait_s"] == 3.0
    assert describe_run(runs[1])["lock_recorded"] == 1
    assert split_runs(rows, gap_s=10_000) and len(split_runs(rows, gap_s=10_000)) == 1


def test_the_floor_the_retakes_and_the_estimate_for_the_tasks_left() -> None:
    t0 = 1_780_000_000.0
    rows = [row("a", t0, 10, 4, baseline_host={"eager": {"calls": 99, "over_spin": 3, "retakes": 2},
                                                 "compile": {"calls": 99, "over_spin": 40, "retakes": 60,
                                                             "spin_blocked": 97}}),
            row("b", t0 + 5, 15, 2, baseline_host={"eager": {"calls": 99, "over_spin": 0, "retakes": 0}})]
    t = timeline(rows, unchecked=10)
    assert t["exclusive_s"] == 6.0 and t["exclusive_per_task_s"] == 3.0 and t["rows_with_lock_record"] == 2
    assert t["baseline_retakes"]["eager"] == {"calls": 198, "over_spin": 3, "retakes": 2, "spin_blocked": 0}
    assert t["baseline_retakes"]["compile"]["retakes"] == 60
    assert t["unchecked_at_last_pace_s"] == 100 and t["unchecked_floor_s"] == 30  # span 20 s over 2 tasks
    text = "\n".join(markdown_lines(t))
    assert "| 2 | 20.0 | 10.0 |" in text and "10 tasks unchecked: about 100 s" in text and "at least 30 s" in text
    assert ("compile baseline: 60 retakes and 40 calls over the spin in 99 timed calls, 97 timed behind the base "
            "spin") in text
    # Rows from before start times were recorded: no section, no estimate.
    old = [CheckRow(task_id="x", status="correct", seconds=3)]
    assert markdown_lines(timeline(old, unchecked=5)) == [] and "unchecked" not in timeline(old, unchecked=5)
