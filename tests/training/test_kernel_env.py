"""``ppo_agentic`` through the real kernel environment on the CPU backend (plumbing: garbage model, reward -1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.config import load_config
from cuda_agent.schemas.trajectory import load_trajectory
from cuda_agent.training.config import TrainConfig
from cuda_agent.training.runner import run_training

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_ppo_agentic_iteration_through_cpu_kernel_environment(tmp_path, monkeypatch):
    from cuda_agent.testing.tiny_lm import cached_tiny_lm

    monkeypatch.chdir(ROOT)  # task paths in the config are relative to the repository
    model = cached_tiny_lm()
    cfg = load_config(TrainConfig, [ROOT / "configs/train/ci_kernel_cpu.yaml"], [f"model={model}", f"run_dir={tmp_path}"])
    out = run_training(cfg)
    stage = tmp_path / "0_ppo_agentic"
    trajs = sorted((stage / "episodes").glob("step_*/*/trajectory.jsonl"))
    assert len(trajs) == 2
    for t in trajs:
        traj = load_trajectory(t)
        assert traj.complete and traj.header.system_prompt_ids is not None  # token-level record for the trainer
        assert traj.turns and all(t.tokens is not None and t.tokens.output_ids for t in traj.turns)
        assert traj.end.reward is not None and traj.end.reward_name == "milestone"
    m = out["metrics"]
    assert m["episodes"] == 2 and m["turns_mean"] >= 1 and m["reward_mean"] <= 3
    assert abs(m["is_weight_mean"] - 1.0) < 1e-3  # rollout log-probs (hf policy) match the trainer's
    assert (Path(out["actor"]) / "tokenizer.json").exists()  # exported actor is a usable hf policy folder
    lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert any(l["stage"] == "ppo_agentic" and l["step"] == 1 for l in lines)
