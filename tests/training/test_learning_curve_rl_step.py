"""RL spread over device runs (``learning_curve.py --phase rl_step``): the records of each run's one PPO step join
the carried ones as the next point, and the carried critic survives its bf16 round trip."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _learning_curve_report import collect_rl_step, merge_rl_step, rl_stage_folder  # noqa: E402


def _run(work: Path, seed: int, step: int, rewards: dict[str, float]) -> None:
    """What a finished ``rl_step`` run leaves: the stage's held-out records after its one step, its metrics."""
    held = work / f"rl_seed{seed}" / rl_stage_folder(step) / "heldout"
    held.mkdir(parents=True)
    (held / "step_00001.jsonl").write_text("".join(json.dumps({"task_id": t, "reward": r}) + "\n"
                                                   for t, r in rewards.items()))
    metrics = [{"stage": "ppo_agentic", "step": 1, "reward_mean": sum(rewards.values()) / len(rewards)}]
    if step == 1:
        metrics.insert(0, {"stage": "value_pretrain", "step": 4, "explained_variance": 0.6})
    (work / f"rl_seed{seed}" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))


def test_two_runs_make_points_rl_1_and_rl_2_and_count_the_steps_per_seed(tmp_path: Path) -> None:
    first = tmp_path / "call1"
    _run(first, 0, 1, {"a": 1.0, "b": -1.0})
    _run(first, 1, 1, {"a": 2.0, "b": 1.0})
    records = merge_rl_step({}, collect_rl_step(first, {0: 1, 1: 1}), {0: 1, 1: 1})
    assert records["steps_done"] == {"0": 1, "1": 1}
    assert sorted(records["points"]) == ["rl_1"] and sorted(records["points"]["rl_1"]) == ["0", "1"]

    second = tmp_path / "call2"  # only seed 1 took its second step in this run (seed 0's was cut)
    _run(second, 1, 2, {"a": 3.0, "b": 2.0})
    records = merge_rl_step(json.loads(json.dumps(records)), collect_rl_step(second, {1: 2}), {0: 1, 1: 2})
    assert records["steps_done"] == {"0": 1, "1": 2}
    assert [r["reward"] for r in records["points"]["rl_2"]["1"]] == [3.0, 2.0]
    assert [r["reward"] for r in records["points"]["rl_1"]["1"]] == [2.0, 1.0]  # the carried point stays
    assert "0" not in records["points"]["rl_2"]
    assert [m["stage"] for m in records["train_metrics"]["1"]] == ["value_pretrain", "ppo_agentic", "ppo_agentic"]


def test_a_step_cut_before_any_evaluation_episode_ended_gives_no_point_and_says_partial(tmp_path: Path) -> None:
    cut = tmp_path / "rl_seed0" / rl_stage_folder(2) / "heldout" / "step_00001"
    (cut / "task_a").mkdir(parents=True)  # an episode folder without a trajectory: nothing ended
    new = collect_rl_step(tmp_path, {0: 2})
    assert new["points"] == {} and new["partial"] == {"rl_2": {"0": 0}}
    merged = merge_rl_step({"steps_done": {"0": 1}}, new, {0: 1})  # the step is not counted: the next run redoes it
    assert merged["steps_done"] == {"0": 1}


def test_the_carried_critic_round_trips_through_bf16_and_refuses_another_tokenizer(tmp_path: Path) -> None:
    import learning_curve

    state = {"backbone.w": torch.randn(8, 4), "value_head.weight": torch.randn(1, 4)}
    torch.save(state, tmp_path / "critic.pt")
    carried = tmp_path / "rl_critic_seed0.safetensors"
    learning_curve.save_critic_state(tmp_path / "critic.pt", carried, "tok1")
    back = torch.load(learning_curve.load_critic_state(carried, tmp_path / "back" / "critic.pt", "tok1"),
                      weights_only=True)
    assert set(back) == set(state) and all(back[k].dtype == torch.float32 for k in back)
    assert all(torch.equal(back[k], state[k].to(torch.bfloat16).float()) for k in state)
    with pytest.raises(SystemExit, match="another tokenizer"):
        learning_curve.load_critic_state(carried, tmp_path / "x.pt", "tok2")
