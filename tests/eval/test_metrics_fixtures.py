"""Metrics of the hand-written fixture run (tests/eval/fixtures/run_small), checked against literals.

The fixture: two tasks (fx/relu level 1, fx/gemm_relu level 2) x two seeds.
Hand computation (best-of-trajectory, regraded):
- relu s0: best = turn 2 (in-traj 2.0x/1.6x; regraded 1.9x eager, 1.5x compile) -> milestone 3
- relu s1: best = turn 1 (correct, untimed in-traj; regraded 0.8x/0.7x) -> milestone 1
- gemm s0: best = turn 2 (in-traj 3.0x/2.0x; regraded 2.5x/2.0x) -> milestone 3
- gemm s1: only a compile error -> nothing selected -> milestone -1
pass 3/4; > eager: relu s0, gemm s0 = 2/4; > compile 2/4;
geomean eager (1.9*0.8*2.5)^(1/3) = 3.8^(1/3) = 1.56049; compile (1.5*0.7*2.0)^(1/3) = 2.1^(1/3) = 1.28058.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.evaluation.metrics import compute_metrics, milestone
from cuda_agent.harness.evaluation.records import Verdict, list_episode_dirs, summarize_episode

FIXTURE = Path(__file__).parent / "fixtures" / "run_small"


@pytest.fixture(scope="module")
def episodes():
    return [summarize_episode(d) for d in list_episode_dirs(FIXTURE)]


@pytest.fixture(scope="module")
def best(episodes):
    return compute_metrics(episodes, mode="best")


def test_headline_regraded(best):
    r = best["regraded"]["overall"]
    assert (best["n_episodes"], best["n_tasks"], best["n_seeds"]) == (4, 2, 2)
    assert r["n_correct"] == 3
    assert r["pass_rate"] == 0.75
    assert r["faster_than_eager_rate"] == 0.5
    assert r["faster_than_compile_rate"] == 0.5
    assert r["geomean_speedup_eager"] == pytest.approx(1.56049, abs=1e-5)
    assert r["geomean_speedup_compile"] == pytest.approx(1.28058, abs=1e-5)
    assert r["milestones"] == {"-1": 1, "1": 1, "2": 0, "3": 2}


def test_per_level(best):
    lv = best["regraded"]["per_level"]
    assert set(lv) == {"1", "2"}
    # level 1: relu s0 (1.9, 1.5) and relu s1 (0.8, 0.7): sqrt(1.52) = 1.23288, sqrt(1.05) = 1.02470
    assert lv["1"]["pass_rate"] == 1.0
    assert lv["1"]["faster_than_compile_rate"] == 0.5
    assert lv["1"]["geomean_speedup_eager"] == pytest.approx(1.23288, abs=1e-5)
    assert lv["1"]["geomean_speedup_compile"] == pytest.approx(1.02470, abs=1e-5)
    assert lv["2"]["pass_rate"] == 0.5
    assert lv["2"]["geomean_speedup_compile"] == 2.0
    assert lv["2"]["milestones"] == {"-1": 1, "1": 0, "2": 0, "3": 1}


def test_in_trajectory_numbers_kept_beside_regraded(best):
    t = best["in_trajectory"]["overall"]
    # in-trajectory best speedups: relu s0 2.0/1.6, gemm s0 3.0/2.0 (relu s1 correct but untimed)
    assert t["pass_rate"] == 0.75
    assert t["geomean_speedup_eager"] == pytest.approx(2.44949, abs=1e-5)  # sqrt(6)
    assert t["geomean_speedup_compile"] == pytest.approx(1.78885, abs=1e-5)  # sqrt(3.2)


def test_best_and_final_differ(episodes):
    final = compute_metrics(episodes, mode="final")["regraded"]["overall"]
    # final: relu s0 turn 3 (1.1x eager, 0.95x compile), relu s1 incorrect, gemm s0 2.5/2.0, gemm s1 compile error
    assert final["pass_rate"] == 0.5
    assert final["faster_than_eager_rate"] == 0.5
    assert final["faster_than_compile_rate"] == 0.25
    assert final["milestones"] == {"-1": 2, "1": 0, "2": 1, "3": 1}
    sel = {ep.episode: ep.selections for ep in episodes}
    assert sel["relu__seed0"]["best"].turn == 2 and sel["relu__seed0"]["final"].turn == 3
    assert sel["relu__seed1"]["best"].snapshot_id == "sha256:b1" and sel["relu__seed1"]["final"].snapshot_id == "sha256:b2"
    assert sel["gemm_relu__seed0"]["best"].snapshot_id == sel["gemm_relu__seed0"]["final"].snapshot_id == "sha256:c2"
    assert sel["gemm_relu__seed1"]["best"].turn is None
    assert sel["relu__seed0"]["first_passing"].turn == 2


def test_budget_curve(best):
    bc = best["budget_curve"]
    assert bc["turns"] == [1, 2, 3]
    assert bc["pass_rate"] == [0.25, 0.75, 0.75]  # k=1: only relu s1's untimed pass
    assert bc["faster_than_compile_rate"] == [0.0, 0.5, 0.5]
    assert bc["geomean_speedup_compile"][0] is None
    assert bc["geomean_speedup_compile"][1] == pytest.approx(1.78885, abs=1e-5)


def test_turns_to_best_cost_and_seed_spread(best):
    assert best["turns_to_best"] == {"n": 3, "median": 2.0, "q1": 1.5, "q3": 2.0, "iqr": 0.5}  # turns 1, 2, 2
    c = best["cost"]
    assert c["wall_s_per_episode"] == {"mean": 23.75, "median": 20.0, "total": 95.0}  # 30, 10, 50, 5
    assert c["tokens_per_episode"] == {"mean": 1137.5, "median": 900.0, "total": 4550.0}  # 1200, 600, 2400, 350
    assert c["gpu_s_per_episode"] == {"mean": 3.0, "median": 3.0, "total": 12.0}  # 4, 2, 6, 0
    s = best["seeds"]["pass_rate"]
    assert s == {"mean": 0.75, "std": 0.25, "min": 0.5, "max": 1.0, "per_seed": [1.0, 0.5]}
    assert best["exits"] == {"max_turns": 2, "submitted": 2}


def test_hidden_false_pass_rates_reported_separately(best):
    h = best["hidden"]
    # visible (regraded) passes: relu s0, relu s1, gemm s0.
    # held-out: gemm s0 fails -> 1/3. widened: relu s1 fails (ReLU as identity); gemm s0 inconclusive -> 1/2.
    assert h["visible_passes"] == 3
    assert (h["heldout_checked"], h["heldout_failed"]) == (3, 1)
    assert h["heldout_false_pass_rate"] == pytest.approx(1 / 3)
    assert (h["widened_checked"], h["widened_failed"]) == (2, 1)
    assert h["widened_false_pass_rate"] == 0.5
    assert h["pass_rate_after_hidden"] == 0.25


@pytest.mark.parametrize(
    ("verdict", "level"),
    [
        (None, -1),
        (Verdict(status="incorrect", speedup_eager=9.0, speedup_compile=9.0), -1),
        (Verdict(status="correct"), 1),
        (Verdict(status="correct", speedup_eager=1.05, speedup_compile=2.0), 1),  # threshold is strict
        (Verdict(status="correct", speedup_eager=1.06, speedup_compile=1.0), 2),
        (Verdict(status="correct", speedup_eager=1.06, speedup_compile=1.06), 3),
    ],
)
def test_milestone_levels(verdict, level):
    assert milestone(verdict) == level
