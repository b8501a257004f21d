"""The grading pass's precision-targeted stop: do the rounds timed so far decide the speedups?

The grading pass (:mod:`cuda_agent.harness.grading`) times candidate, eager and compile in interleaved rounds; with
the stop on (``TimingProtocol.grade_target_rel_ci``, preset ``standard_fast``) it asks :func:`stop_check` after
each round from ``grade_min_rounds`` on. A speedup's interval is the ratio of the pooled medians with their per-call
95% intervals added in quadrature, widened to cover every round's own ratio (a round that disagrees with the others
keeps the pass going however tight each round is). The pass stops once every interval is within the target and
holds none of ``grade_stop_thresholds``, so an early stop never moves a speedup across a verdict line.

Pure functions over per-round samples: ``benchmarks/grading_stop_replay.py`` replays the same rule on recorded rows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cuda_agent.harness.timing_stats import median_rel_ci

#: ``Diagnostics.grade_stop_reason`` of a pass that ran every round with the stop off.
ALL_ROUNDS = "all_rounds"
#: ... of a pass the stop ended (the speedups and their intervals follow after ': ').
PRECISE = "precise"
#: ... of a pass that ran every round with the stop on without meeting it (what held it last follows after ': ').
MAX_ROUNDS = "max_rounds"


@dataclass(frozen=True)
class SpeedupInterval:
    """A speedup (baseline median over candidate median, all rounds pooled) and its ~95% interval."""

    speedup: float
    lo: float
    hi: float

    @property
    def rel_half_width(self) -> float:
        """Half the interval's width as a fraction of the speedup (inf when unknown)."""
        if not (self.speedup > 0 and math.isfinite(self.lo) and math.isfinite(self.hi)):
            return math.inf
        return (self.hi - self.lo) / 2 / self.speedup

    def holds(self, line: float) -> bool:
        """``line`` is inside the interval (its ends included): the verdict at it is not decided yet."""
        return self.lo <= line <= self.hi

    def describe(self) -> str:
        return f"{self.speedup:.4f} [{self.lo:.4f}, {self.hi:.4f}]"


@dataclass(frozen=True)
class StopCheck:
    """What :func:`stop_check` found: whether to stop, and why (or why not)."""

    stop: bool
    why: str


def _flat(rounds: Sequence[Sequence[float]]) -> list[float]:
    return [x for r in rounds for x in r]


def speedup_interval(baseline_rounds: Sequence[Sequence[float]],
                     candidate_rounds: Sequence[Sequence[float]]) -> SpeedupInterval:
    """The speedup of the candidate against one baseline from per-round per-call milliseconds (round ``i`` of
    both timed back to back): pooled medians' ratio; interval from the medians' relative 95% intervals
    (:func:`~cuda_agent.harness.timing_stats.median_rel_ci`, in quadrature) widened to each round's own ratio."""
    base, cand = _flat(baseline_rounds), _flat(candidate_rounds)
    if not base or not cand:
        return SpeedupInterval(math.nan, -math.inf, math.inf)
    s = statistics.median(base) / statistics.median(cand)
    rel = math.hypot(median_rel_ci(base), median_rel_ci(cand))
    lo, hi = s * (1 - rel), s * (1 + rel)
    for b, c in zip(baseline_rounds, candidate_rounds):
        if b and c:
            r = statistics.median(b) / statistics.median(c)
            lo, hi = min(lo, r), max(hi, r)
    return SpeedupInterval(s, lo, hi)


def stop_check(candidate_rounds: Sequence[Sequence[float]], baselines: Mapping[str, Sequence[Sequence[float]]], *,
               min_rounds: int, target_rel_ci: float, thresholds: Sequence[float]) -> StopCheck:
    """May the grading pass stop after the rounds in ``candidate_rounds``? ``baselines``: per baseline kind
    ('eager', 'compile'), its rounds (those of a kind not timed are absent or empty). Stops when at least
    ``min_rounds`` ran and every baseline's :func:`speedup_interval` has a relative half-width within
    ``target_rel_ci`` and holds no line of ``thresholds``."""
    done = len(candidate_rounds)
    if done < min_rounds:
        return StopCheck(False, f"{done} of at least {min_rounds} rounds")
    seen: list[str] = []
    for kind, rounds in baselines.items():
        if not rounds:
            continue
        iv = speedup_interval(rounds, candidate_rounds)
        if iv.rel_half_width > target_rel_ci:
            return StopCheck(False, f"{kind} {iv.describe()}: +-{iv.rel_half_width:.2%} is wider than "
                                    f"+-{target_rel_ci:.2%}")
        held = [t for t in thresholds if iv.holds(t)]
        if held:
            return StopCheck(False, f"{kind} {iv.describe()} holds the line {held[0]:g}")
        seen.append(f"{kind} {iv.describe()}")
    if not seen:
        return StopCheck(False, "no baseline timed")
    return StopCheck(True, "; ".join(seen))


def stop_reason(check: StopCheck | None) -> str:
    """``Diagnostics.grade_stop_reason`` from the last check of a pass (None: the stop was off)."""
    if check is None:
        return ALL_ROUNDS
    return f"{PRECISE if check.stop else MAX_ROUNDS}: {check.why}"
