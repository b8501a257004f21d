"""The paper's metrics plus what it leaves out, computed from episode summaries.

Unit: an *episode* is one (task, seed) pair; rates divide by all episodes,
counting an episode with no selected candidate, or one that could not run,
as a failure. Definitions (also written into every report's provenance):

- pass rate: the selected candidate is correct;
- faster-than-eager / faster-than-compile rate: correct and speedup > 1.0;
- geomean speedup: geometric mean over correct, timed candidates only (the paper's);
- milestones: -1 not correct; 1 correct; 2 correct and > 1.05x eager;
  3 correct and > 1.05x both eager and compile (the paper's reward levels);
- budget curves: at each budget point k, the trusted regrade of the best
  candidate of turns 1..k (the eval runner regrades each distinct snapshot
  once: ``eval.budget_regrade``); runs made without those regrades fall back
  to the trajectory's own tool results for k = 1..N, and say so (``source``);
- turns to best: turn of the best-of-trajectory candidate (median, IQR with
  inclusive quartiles), over episodes that have one;
- spread over seeds: each metric per seed index, then mean, population std, min, max;
- hidden false-pass rates: among selected candidates the trusted grading pass
  found correct and hidden re-verification checked, the fraction failing
  held-out seeds, and separately the fraction failing widened inputs.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from cuda_agent.harness.evaluation.records import EpisodeSummary, Verdict
from cuda_agent.harness.evaluation.selection import select

#: Speedup above which a candidate counts as faster (rates).
FASTER_THAN = 1.0
#: Speedup above which a milestone is reached (the paper's 5%).
MILESTONE_THRESHOLD = 1.05

DEFINITIONS: dict[str, str] = {
    "episode": "one (task, seed) pair; rates divide by all episodes, an episode without a selected candidate or with a runner error counts as a failure",
    "pass_rate": "fraction of episodes whose selected candidate is correct",
    "faster_than_eager_rate": "fraction of episodes whose selected candidate is correct with speedup vs eager > 1.0",
    "faster_than_compile_rate": "fraction of episodes whose selected candidate is correct with speedup vs torch.compile > 1.0",
    "geomean_speedup_eager": "geometric mean of speedup vs eager over correct, timed selected candidates",
    "geomean_speedup_compile": "geometric mean of speedup vs torch.compile over correct, timed selected candidates",
    "milestones": "count per level: -1 not correct; 1 correct; 2 > 1.05x eager; 3 > 1.05x eager and compile",
    "regraded": "numbers from the trusted grading pass (fresh seeds, fresh process) of the selected snapshot",
    "in_trajectory": "numbers the agent's own compile/verify/profile tool calls reported for the selected candidate",
    "budget_curve": "at each budget point k, the metric of the best-of-first-k-turns candidate as the trusted grading pass regraded it (source 'regraded'); runs without budget regrades: from the agent's own tool results for k = 1..N (source 'in_trajectory')",
    "turns_to_best": "turn of the best-of-trajectory candidate; median and inclusive quartiles over episodes that have one",
    "cost": "per episode: agent-loop wall seconds, prompt+completion tokens, device seconds (timing-lock time measured by the runner, else the sum of verify/profile/grade durations)",
    "seeds": "each metric computed per seed index, then mean, population std, min and max",
    "hidden_heldout_false_pass_rate": "among regraded-correct selected candidates checked, the fraction failing verification with held-out seeds",
    "hidden_widened_false_pass_rate": "among regraded-correct selected candidates checked on widened inputs, the fraction failing",
}


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of positive values; None for an empty sequence."""
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def milestone(verdict: Verdict | None) -> int:
    """The paper's milestone level of a verdict: -1, 1, 2 or 3."""
    if verdict is None or not verdict.passed:
        return -1
    eager_ok = verdict.speedup_eager is not None and verdict.speedup_eager > MILESTONE_THRESHOLD
    compile_ok = verdict.speedup_compile is not None and verdict.speedup_compile > MILESTONE_THRESHOLD
    if eager_ok and compile_ok:
        return 3
    return 2 if eager_ok else 1


def _verdict(ep: EpisodeSummary, mode: str, source: str) -> Verdict | None:
    outcome = ep.selections.get(mode)
    if outcome is None:
        return None
    return outcome.regraded if source == "regraded" else outcome.in_trajectory


def rate_block(verdicts: Sequence[Verdict | None]) -> dict[str, Any]:
    """Pass/faster rates, geomeans and milestone counts of a list of per-episode verdicts."""
    n = len(verdicts)
    correct = [v for v in verdicts if v is not None and v.passed]
    fe = [v for v in correct if v.speedup_eager is not None and v.speedup_eager > FASTER_THAN]
    fc = [v for v in correct if v.speedup_compile is not None and v.speedup_compile > FASTER_THAN]
    levels = {"-1": 0, "1": 0, "2": 0, "3": 0}
    for v in verdicts:
        levels[str(milestone(v))] += 1
    return {
        "n": n,
        "n_correct": len(correct),
        "pass_rate": len(correct) / n if n else None,
        "faster_than_eager_rate": len(fe) / n if n else None,
        "faster_than_compile_rate": len(fc) / n if n else None,
        "geomean_speedup_eager": geomean(v.speedup_eager for v in correct if v.speedup_eager is not None),
        "geomean_speedup_compile": geomean(v.speedup_compile for v in correct if v.speedup_compile is not None),
        "milestones": levels,
    }


def _spread(values: Sequence[float | None]) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "min": None, "max": None, "per_seed": list(values)}
    return {
        "mean": statistics.fmean(vals),
        "std": statistics.pstdev(vals) if len(vals) > 1 else 0.0,
        "min": min(vals),
        "max": max(vals),
        "per_seed": list(values),
    }


def _quartiles(values: Sequence[float]) -> dict[str, Any]:
    vals = sorted(values)
    if not vals:
        return {"n": 0, "median": None, "q1": None, "q3": None, "iqr": None}
    if len(vals) == 1:
        q1 = q3 = vals[0]
    else:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    return {"n": len(vals), "median": statistics.median(vals), "q1": q1, "q3": q3, "iqr": q3 - q1}


def _mean_median(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "median": None, "total": 0.0}
    return {"mean": statistics.fmean(values), "median": statistics.median(values), "total": float(sum(values))}


CURVE_KEYS = ("pass_rate", "faster_than_eager_rate", "faster_than_compile_rate",
              "geomean_speedup_eager", "geomean_speedup_compile")


def _regraded_points(episodes: Sequence[EpisodeSummary]) -> list[int] | None:
    """The budget points every episode that ran has a regrade for, or None when some lack them."""
    ran = [ep for ep in episodes if ep.runner_error is None]
    if not ran or any(not ep.budget for ep in ran):
        return None
    points = set.intersection(*({p.turn for p in ep.budget} for ep in ran))
    return sorted(points) or None


def budget_curve(episodes: Sequence[EpisodeSummary], max_turns: int | None = None) -> dict[str, Any]:
    """Rates and geomeans of the best-of-first-k-turns candidate at each budget point (see the module doc)."""
    points = _regraded_points(episodes)
    curve: dict[str, Any] = {"source": "regraded" if points is not None else "in_trajectory", "turns": [],
                             **{key: [] for key in CURVE_KEYS}}
    if points is not None:
        for k in points:
            verdicts = [next((p.regraded for p in ep.budget if p.turn == k), None) for ep in episodes]
            block = rate_block(verdicts)
            curve["turns"].append(k)
            for key in CURVE_KEYS:
                curve[key].append(block[key])
        return curve
    n_turns = max_turns or max((ep.turns for ep in episodes), default=0)
    for k in range(1, n_turns + 1):
        verdicts = []
        for ep in episodes:
            chosen = select("best", ep.events, ep.final_snapshots, upto_turn=k)
            verdicts.append(chosen.verdict if chosen else None)
        block = rate_block(verdicts)
        curve["turns"].append(k)
        for key in CURVE_KEYS:
            curve[key].append(block[key])
    return curve


def hidden_block(episodes: Sequence[EpisodeSummary], mode: str = "best") -> dict[str, Any]:
    """Hidden re-verification: the two false-pass rates, reported separately."""
    visible = [ep.selections[mode] for ep in episodes if mode in ep.selections
               and ep.selections[mode].regraded is not None and ep.selections[mode].regraded.passed]
    held = [o.hidden_heldout_pass for o in visible if o.hidden_heldout_pass is not None]
    wide = [o.hidden_widened_pass for o in visible if o.hidden_widened_pass is not None]
    held_fail = sum(1 for p in held if not p)
    wide_fail = sum(1 for p in wide if not p)
    survived = sum(1 for o in visible if o.hidden_heldout_pass is not False and o.hidden_widened_pass is not False)
    return {
        "visible_passes": len(visible),
        "heldout_checked": len(held),
        "heldout_failed": held_fail,
        "heldout_false_pass_rate": held_fail / len(held) if held else None,
        "widened_checked": len(wide),
        "widened_failed": wide_fail,
        "widened_false_pass_rate": wide_fail / len(wide) if wide else None,
        "pass_rate_after_hidden": survived / len(episodes) if episodes else None,
    }


def compute_metrics(
    episodes: Sequence[EpisodeSummary],
    *,
    mode: str = "best",
    max_turns: int | None = None,
    regraded_mode: bool = True,
) -> dict[str, Any]:
    """Every metric of one eval run for one selection mode (see the module docstring).

    :param regraded_mode: False when the run did not re-grade this mode's
        candidates (``eval.selections``): the regraded block, seed spread and
        hidden block are then None instead of counting every episode as failed.
    """
    regraded = [_verdict(ep, mode, "regraded") for ep in episodes]
    in_traj = [_verdict(ep, mode, "in_trajectory") for ep in episodes]
    by_level: dict[str, list[int]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        by_level[str(ep.level) if ep.level is not None else "none"].append(i)
    by_seed: dict[int, list[int]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        by_seed[ep.seed_index].append(i)

    per_seed_blocks = [rate_block([regraded[i] for i in idx]) for _, idx in sorted(by_seed.items())]
    seeds = {
        key: _spread([b[key] for b in per_seed_blocks])
        for key in ("pass_rate", "faster_than_eager_rate", "faster_than_compile_rate",
                    "geomean_speedup_eager", "geomean_speedup_compile")
    }
    best_turns = [ep.selections["best"].turn for ep in episodes
                  if "best" in ep.selections and ep.selections["best"].turn is not None]
    if not regraded_mode:
        seeds = {key: None for key in seeds}
    return {
        "selection": mode,
        "regraded_by_run": regraded_mode,
        "n_episodes": len(episodes),
        "n_tasks": len({ep.task_id for ep in episodes}),
        "n_seeds": len(by_seed),
        "regraded": {
            "overall": rate_block(regraded),
            "per_level": {lvl: rate_block([regraded[i] for i in idx]) for lvl, idx in sorted(by_level.items())},
        } if regraded_mode else None,
        "in_trajectory": {
            "overall": rate_block(in_traj),
            "per_level": {lvl: rate_block([in_traj[i] for i in idx]) for lvl, idx in sorted(by_level.items())},
        },
        "budget_curve": budget_curve(episodes, max_turns),
        "turns_to_best": _quartiles([float(t) for t in best_turns]),
        "cost": {
            "wall_s_per_episode": _mean_median([ep.wall_s for ep in episodes]),
            "tokens_per_episode": _mean_median([float(ep.tokens) for ep in episodes]),
            "gpu_s_per_episode": _mean_median([ep.gpu_s for ep in episodes]),
        },
        "seeds": seeds,
        "hidden": hidden_block(episodes, mode) if regraded_mode else None,
        "exits": dict(sorted(_count(ep.exit for ep in episodes).items())),
    }


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for item in items:
        out[item] += 1
    return dict(out)
