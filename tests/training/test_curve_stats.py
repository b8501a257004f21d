"""Learning-curve statistics: paired bootstrap over (task, seed), summaries of held-out records."""

from __future__ import annotations

import json
import math

import pytest

from cuda_agent.training.kernel_family.curve_stats import keyed, metric, paired_bootstrap
from cuda_agent.training.stages.heldout import summarize


def _rec(task: str, reward: float, **kw) -> dict:
    return {"task_id": task, "reward": reward, "passed": reward > 0, "speedup_eager": kw.get("se"), "speedup_compile": None,
            "hack": kw.get("hack", False),
            "turns": 4, "first_pass_turn": 2 if reward > 0 else None, "fused": kw.get("fused"), "vector": kw.get("vector"),
            "launch": kw.get("launch")}


def test_paired_bootstrap_of_a_constant_gain_is_that_gain() -> None:
    before = keyed({0: [_rec(f"t{i}", 1.0) for i in range(10)], 1: [_rec(f"t{i}", -1.0) for i in range(10)]})
    after = keyed({0: [_rec(f"t{i}", 2.0) for i in range(10)], 1: [_rec(f"t{i}", 0.0) for i in range(10)]})
    out = paired_bootstrap(after, before, metric("reward"), n_boot=500)
    assert out["pairs"] == 20 and out["diff"] == pytest.approx(1.0)
    assert out["low"] == pytest.approx(1.0) and out["high"] == pytest.approx(1.0) and out["excludes_zero"] == 1.0


def test_paired_bootstrap_interval_contains_the_mean_and_pairs_only_shared_keys() -> None:
    before = keyed({0: [_rec(f"t{i}", 1.0) for i in range(40)]})
    after = keyed({0: [_rec(f"t{i}", 1.0 + (2.0 if i % 4 == 0 else -0.5)) for i in range(30)]})
    out = paired_bootstrap(after, before, metric("reward"), n_boot=2000, seed=1)
    assert out["pairs"] == 30
    assert out["low"] <= out["diff"] <= out["high"]
    mean = (8 * 2.0 - 22 * 0.5) / 30
    assert out["diff"] == pytest.approx(mean)
    assert out["excludes_zero"] == 0.0  # a mixed gain of ~0.17 over 30 pairs: the interval reaches zero
    assert math.isnan(paired_bootstrap({}, before, metric("reward"))["diff"])


def test_summary_rates_and_habit_shares() -> None:
    recs = [_rec("a", 2.0, se=1.5, fused=True, vector=True, launch="t256"), _rec("b", 1.0, se=0.9, fused=False, launch="narrow"),
            _rec("c", -1.0), _rec("d", -1.0, hack=True)]
    s = summarize(recs)
    assert s["pass_rate"] == 0.5 and s["reward_mean"] == pytest.approx(0.25)
    assert s["faster_than_eager"] == 0.25 and s["hack_rate"] == 0.25
    assert s["fused_share"] == 0.5 and s["launch_share_narrow"] == 0.5 and s["reward_frac_-1"] == 0.5
    with pytest.raises(ValueError, match="valid"):
        metric("speed")


def test_a_held_out_evaluation_cut_by_the_budget_contributes_its_ended_episodes(tmp_path) -> None:
    """issue 22: a phase killed at the device deadline leaves episode folders and no ``<tag>.jsonl``; the report
    keeps the episodes that ended, says the point is partial, and never counts an unfinished one."""
    import sys
    from pathlib import Path

    from cuda_agent.schemas.trajectory import EndRecord, HeaderRecord, append_record

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _learning_curve_report import collect_records

    tag_dir = tmp_path / "rl_seed0" / "1_ppo_agentic" / "heldout" / "step_00001"
    for k, (task, reward) in enumerate([("t0", 2.0), ("t1", -1.0), ("t2", None)]):
        d = tag_dir / f"{k:03d}_00"
        d.mkdir(parents=True)
        with (d / "trajectory.jsonl").open("w") as fh:
            append_record(fh, HeaderRecord(run_id="r", task_id=task, task_code_hash="h", policy="hf", backend="cpu",
                                           system_prompt="s", task_prompt="p", started_at="2026-12-03T00:00:00Z"))
            if reward is not None:  # t2 was still running when the phase was stopped
                append_record(fh, EndRecord(exit="submitted", turns=1, reward=reward))
    out = collect_records(tmp_path, [0], "rl", rl_steps=2)
    recs = out["points"]["rl_1"]["0"]
    assert sorted((r["task_id"], r["reward"]) for r in recs) == [("t0", 2.0), ("t1", -1.0)]
    assert out["partial"] == {"rl_1": {"0": 2}} and "rl_2" not in out["points"]

    (tag_dir.parent / "step_00001.jsonl").write_text(json.dumps({**recs[0], "task_id": "t9"}) + "\n")
    done = collect_records(tmp_path, [0], "rl", rl_steps=2)  # a finished evaluation's file wins
    assert [r["task_id"] for r in done["points"]["rl_1"]["0"]] == ["t9"] and "partial" not in done


def test_diagnostics_say_where_a_cut_runs_time_went(tmp_path) -> None:
    """issue 22: the first H200 run's SFT evaluation was killed at the deadline and nothing said why (the work folder
    stays on the device machine). The diagnostics give, per episode group, ended and running episodes and the mean
    seconds by policy, tool and final grading, from the turn records."""
    import sys
    from pathlib import Path

    from cuda_agent.schemas.trajectory import EndRecord, HeaderRecord, TurnRecord, TurnTokens, append_record

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _learning_curve_report import diagnostics

    from cuda_agent.harness.evaluation.scheduling import EpisodeUsage
    from cuda_agent.training.stages.kernel_rollouts import _write_usage

    run = tmp_path / "sft_seed0"
    (run).mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps({"stage": "sft", "step": k, "sft_loss": 5.0 - k}) + "\n"
                                               for k in range(1, 61)))
    group = run / "0_sft" / "heldout" / "final"
    for k, ended in enumerate([True, False]):
        d = group / f"{k:03d}_00"
        d.mkdir(parents=True)
        with (d / "trajectory.jsonl").open("w") as fh:
            append_record(fh, HeaderRecord(run_id="r", task_id=f"t{k}", task_code_hash="h", policy="hf", backend="cuda",
                                           system_prompt="s", task_prompt="p", started_at="2026-12-03T00:00:00Z"))
            append_record(fh, TurnRecord(turn=1, text="write", tokens=TurnTokens(prompt_delta_ids=[1], output_ids=[5] * 300,
                                                                                 output_logprobs=[0.0] * 300),
                                         timings={"policy_s": 10.0, "tools_s": 4.0, "tool.compile_s": 3.0}))
            if ended:
                append_record(fh, TurnRecord(turn=2, text="profile", timings={"policy_s": 2.0, "tools_s": 6.0,
                                                                               "tool.profile_s": 6.0},
                                             usage={"completion_tokens": 100}))
                append_record(fh, EndRecord(exit="submitted", turns=2, reward=1.0, wall_s=30.0))
                # what the concurrent rollouts write beside an episode that ended
                _write_usage(d, EpisodeUsage(build_s=2.5, build_wait_s=1.0, warm_wait_s=6.0, gpu_busy_s=4.0, gpu_wait_s=9.0,
                                             device_phase_s={"acquire": 0.5, "forward_calls": 3.0},
                                             runner_start_s=[9.0, 2.0, 4.0]), 30.0)
    out = diagnostics(tmp_path, [0])
    info = out["sft_seed0"]["episodes"]["0_sft/heldout/final"]
    assert (info["ended"], info["running"]) == (1, 1)
    t = info["times"]
    assert t["policy_s_mean"] == 12.0 / 2 + 10.0 / 2 and t["tool_compile_s_mean"] == 3.0
    assert t["tool_profile_s_mean"] == 3.0 and t["tokens_per_turn"] == (300 + 100 + 300) / 3
    assert t["grade_s_mean"] == 30.0 - 12.0 - 10.0 and t["wall_s_mean"] == 30.0  # the ended episode's own
    assert [r["step"] for r in out["sft_seed0"]["metrics"]] == [1, 26, 51, 60] and info["sample"][0]["text"] == "write"
    assert info["usage_mean"] == {"build_s": 2.5, "build_wait_s": 1.0, "warm_wait_s": 6.0, "device_busy_s": 4.0,
                                  "device_wait_s": 9.0, "wall_s": 30.0}
    assert list(info["device_phase_s_mean"].items()) == [("forward_calls", 3.0), ("acquire", 0.5)]  # largest first
    assert info["runner_start_s"] == {"n": 3, "median": 4.0, "max": 9.0}


def test_a_phase_run_one_seed_at_a_time_keeps_the_other_seeds_records() -> None:
    """issue 22: RL of one seed per device run (``--seeds``); each run's records join the carried ones."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _learning_curve_report import merge_seeds

    carried = {"phase": "rl", "points": {"rl_1": {"0": [{"task_id": "a", "reward": 1.0}]},
                                         "rl_2": {"0": [{"task_id": "a", "reward": 2.0}]}},
               "partial": {"rl_2": {"0": 1}}, "train_metrics": {"0": [{"step": 1}]}}
    new = {"phase": "rl", "points": {"rl_1": {"1": [{"task_id": "a", "reward": -1.0}]},
                                     "rl_2": {"1": [{"task_id": "a", "reward": 3.0}]}},
           "train_metrics": {"1": [{"step": 1}]}}
    merged = merge_seeds(carried, new)
    assert sorted(merged["points"]["rl_1"]) == ["0", "1"] and merged["points"]["rl_2"]["1"][0]["reward"] == 3.0
    assert merged["partial"] == {"rl_2": {"0": 1}} and sorted(merged["train_metrics"]) == ["0", "1"]
    again = merge_seeds(merged, {"phase": "rl", "points": {"rl_2": {"0": [{"task_id": "a", "reward": 1.0}]}}})
    assert "partial" not in again and again["points"]["rl_2"]["0"][0]["reward"] == 1.0  # seed 0 rerun, complete
    assert carried["points"]["rl_1"] == {"0": [{"task_id": "a", "reward": 1.0}]}  # the inputs are not changed
