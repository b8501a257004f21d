"""Per-task and per-episode rows of a report: what happened to each task, in numbers people act on.

A task row folds its seeds together: the best-of-trajectory candidate's trusted status (``correct`` or
``2/3 correct``), the median speedups vs eager and vs torch.compile of its correct candidates, median turns,
mean tokens, and the cost (device and wall seconds per episode). Episode rows keep every seed's numbers.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from cuda_agent.harness.evaluation.records import EpisodeSummary, Verdict


def _median(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _mean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def verdict_of(ep: EpisodeSummary, mode: str = "best") -> Verdict | None:
    """The regraded verdict of ``mode``'s candidate, else the in-trajectory one (runs without regrading)."""
    o = ep.selections.get(mode)
    if o is None:
        return None
    return o.regraded if o.regraded is not None else o.in_trajectory


def status_of(ep: EpisodeSummary, mode: str = "best") -> str:
    """What happened, in one word: the candidate's status, 'no correct candidate', or the error that ended it."""
    if ep.exit in ("runner_error", "policy_error", "error"):
        return ep.exit
    v = verdict_of(ep, mode)
    return v.status if v is not None else "no correct candidate"


def _speedups(v: Verdict | None) -> tuple[float | None, float | None]:
    if v is None or not v.passed:
        return None, None
    return v.speedup_eager, v.speedup_compile


def episode_rows(episodes: Sequence[EpisodeSummary]) -> list[dict[str, Any]]:
    """Per-episode rows: statuses per selection mode, regraded speedups, turns, tokens, cost, exit reason."""
    rows = []
    for ep in sorted(episodes, key=lambda e: (e.task_id, e.seed_index)):
        selections, speedups = {}, {}
        for mode, o in sorted(ep.selections.items()):
            selections[mode] = {
                "turn": o.turn,
                "snapshot_id": o.snapshot_id,
                "in_trajectory": o.in_trajectory.status if o.in_trajectory else None,
                "regraded": o.regraded.status if o.regraded else None,
                "hidden_heldout_pass": o.hidden_heldout_pass,
                "hidden_widened_pass": o.hidden_widened_pass,
            }
            eager, comp = _speedups(o.regraded)
            speedups[mode] = {"eager": eager, "compile": comp}
        rows.append({
            "task_id": ep.task_id,
            "level": ep.level,
            "seed_index": ep.seed_index,
            "exit": ep.exit,
            "message": ep.runner_error.splitlines()[0] if ep.runner_error else ep.message,
            "turns": ep.turns,
            "tokens": ep.tokens,
            "device_s": ep.gpu_s,
            "wall_s": ep.wall_s,
            "selections": selections,
            "speedups": speedups,
        })
    return rows


def task_rows(episodes: Sequence[EpisodeSummary], mode: str = "best") -> list[dict[str, Any]]:
    """One row per task over its seeds (see the module doc)."""
    by_task: dict[str, list[EpisodeSummary]] = defaultdict(list)
    for ep in episodes:
        by_task[ep.task_id].append(ep)
    rows = []
    for task_id, eps in sorted(by_task.items()):
        statuses = [status_of(ep, mode) for ep in eps]
        n_correct = statuses.count("correct")
        if len(set(statuses)) == 1:
            status = statuses[0]
        else:
            status = f"{n_correct}/{len(eps)} correct"
        speeds = [_speedups(verdict_of(ep, mode)) for ep in eps]
        rows.append({
            "task_id": task_id,
            "level": eps[0].level,
            "episodes": len(eps),
            "status": status,
            "statuses": dict(Counter(statuses)),
            "speedup_eager": _median([s[0] for s in speeds]),
            "speedup_compile": _median([s[1] for s in speeds]),
            "turns": _median([float(ep.turns) for ep in eps]),
            "tokens": _mean([float(ep.tokens) for ep in eps]),
            "device_s": _mean([ep.gpu_s for ep in eps]),
            "wall_s": _mean([ep.wall_s for ep in eps]),
            "exits": dict(Counter(ep.exit for ep in eps)),
        })
    return rows
