"""Statistics of the learning curve: paired bootstrap over (held-out task, seed), per-point summaries.

Every evaluation point (after SFT, after each RL step, the control arm) has one record per (task, seed)
(:func:`cuda_agent.training.stages.heldout.episode_record`). Two points are compared on the pairs both
have: the difference of the means and a percentile bootstrap interval that resamples pairs, so the
task-to-task and seed-to-seed variation both enter the interval.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

Record = dict[str, Any]
Key = tuple[str, int]  # (task id, seed)


def keyed(records_by_seed: dict[int, list[Record]]) -> dict[Key, Record]:
    """``{(task_id, seed): record}`` (the first record of a task when it was run several times)."""
    out: dict[Key, Record] = {}
    for seed, records in records_by_seed.items():
        for r in records:
            out.setdefault((str(r.get("task_id")), seed), r)
    return out


def metric(name: str) -> Callable[[Record], float]:
    """A per-record value: ``reward``, ``passed``, ``faster_than_eager`` or ``hack`` (booleans as 0/1)."""
    if name == "reward":
        return lambda r: float(r["reward"])
    if name == "passed":
        return lambda r: float(bool(r["passed"]))
    if name == "faster_than_eager":
        return lambda r: float(bool(r["passed"]) and (r.get("speedup_eager") or 0.0) > 1.0)
    if name == "hack":
        from cuda_agent.training.stages.heldout import record_is_hack

        return lambda r: float(record_is_hack(r))
    raise ValueError(f"unknown metric {name!r}; valid: reward, passed, faster_than_eager, hack")


def paired_bootstrap(after: dict[Key, Record], before: dict[Key, Record], value: Callable[[Record], float],
                     n_boot: int = 10000, seed: int = 0, level: float = 0.95) -> dict[str, float]:
    """Mean of ``value(after) - value(before)`` over the shared (task, seed) pairs with a bootstrap interval."""
    keys = sorted(set(after) & set(before))
    if not keys:
        return {"pairs": 0.0, "diff": float("nan"), "low": float("nan"), "high": float("nan")}
    diffs = [value(after[k]) - value(before[k]) for k in keys]
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    lo = means[int((1 - level) / 2 * n_boot)]
    hi = means[min(n_boot - 1, int((1 + level) / 2 * n_boot))]
    return {"pairs": float(n), "diff": sum(diffs) / n, "low": lo, "high": hi, "excludes_zero": float(lo > 0 or hi < 0)}


def point_summary(records: Sequence[Record]) -> dict[str, float]:
    """Means over one point's records: pass rate, milestone reward, faster-than-eager, hack rate, shares."""
    from cuda_agent.training.stages.heldout import summarize

    return summarize(list(records))
