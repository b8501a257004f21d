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
    cfg.stages[0].config["steps"] = 2  # step 2 samples through the same hf engine, weights refreshed
    # held-out tasks evaluated once, after step 2 (heldout_every 2), not before step 1 nor after it
    cfg.stages[0].config.update(eval_tasks=["examples/tasks/swish.py"], eval_at_start=False, heldout_every=2)
    out = run_training(cfg)
    stage = tmp_path / "0_ppo_agentic"
    trajs = sorted((stage / "episodes").glob("step_*/*/trajectory.jsonl"))
    assert len(trajs) == 4
    for t in trajs:
        traj = load_trajectory(t)
        assert traj.complete and traj.header.system_prompt_ids is not None  # token-level record for the trainer
        assert traj.turns and all(t.tokens is not None and t.tokens.output_ids for t in traj.turns)
        assert traj.end.reward is not None and traj.end.reward_name == "milestone"
    m = out["metrics"]
    assert m["episodes"] == 2 and m["turns_mean"] >= 1 and m["reward_mean"] <= 3
    lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [l for l in lines if l["stage"] == "ppo_agentic"]
    assert [l["step"] for l in steps] == [1, 2]
    assert "heldout_reward_mean" not in steps[0] and "heldout_reward_mean" in steps[1]
    assert [p.name for p in sorted((stage / "heldout").glob("step_*.jsonl"))] == ["step_00002.jsonl"]
    # Rollout log-probs (hf engine) match the trainer's at both steps: step 2 sampled from the updated weights.
    assert all(abs(l["is_weight_mean"] - 1.0) < 1e-3 for l in steps)
    assert (Path(out["actor"]) / "tokenizer.json").exists()  # exported actor is a usable hf policy folder



def test_kernel_source_loads_the_hf_engine_once_and_refreshes_its_weights(tmp_path):
    """One rollout engine per stage: later steps load the exported actor's weights into it (never a stale model)."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from cuda_agent.testing.tiny_lm import cached_tiny_lm
    from cuda_agent.training.stages.episodes import KernelEpisodeSource

    first = Path(cached_tiny_lm())
    second = tmp_path / "step2"
    shutil.copytree(first, second)
    model = AutoModelForCausalLM.from_pretrained(first)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)
    model.save_pretrained(second)

    source = KernelEpisodeSource.__new__(KernelEpisodeSource)  # only the rollout-engine part is under test
    source._hf, source._tokenizer, source.max_new_tokens, source.temperature = None, None, 8, 1.0

    def weights(engine):
        return torch.cat([p.detach().flatten() for p in engine.model.parameters()])

    policy = source._hf_policy(first, seed=1, refresh=True)
    engine = source._hf
    loaded = weights(engine)
    assert torch.equal(loaded, torch.cat([p.flatten() for p in AutoModelForCausalLM.from_pretrained(first).parameters()]))
    source._hf_policy(second, seed=2, refresh=False)  # a later episode of the same step: same engine, same weights
    assert source._hf is engine and torch.equal(weights(engine), loaded)
    again = source._hf_policy(second, seed=3, refresh=True)  # the next step's first episode: new weights
    assert source._hf is engine and torch.equal(weights(engine), torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert policy is not again and again.params.seed == 3
