"""benchmarks/ppo_trust_region.py on a tiny real model: a larger actor rate moves the policy further."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from cuda_agent.training.engines.models import load_causal_lm

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import ppo_trust_region  # noqa: E402

TINY = {"model_type": "llama", "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64}


@pytest.fixture
def actor_and_episodes(tmp_path: Path) -> tuple[Path, Path]:
    actor = tmp_path / "actor"
    load_causal_lm(TINY, seed=0).save_pretrained(str(actor))
    g = torch.Generator().manual_seed(0)
    rows = []
    for i in range(8):
        n = 20 + i
        rows.append({"token_ids": torch.randint(0, 32, (n,), generator=g), "loss_mask": torch.tensor([0] * 5 + [1] * (n - 5)),
                     "reward": 2.0})
    episodes = tmp_path / "episodes.pt"
    torch.save(rows, episodes)
    return actor, episodes


def test_a_larger_rate_moves_the_policy_further(actor_and_episodes, tmp_path):
    actor, episodes = actor_and_episodes
    out = ppo_trust_region.main(["--actor", str(actor), "--episodes", str(episodes), "--lr", "3e-2,1e-6", "--n", "8",
                                 "--pass-share", "0.5", "--epochs", "2", "--minibatches", "2",
                                 "--out", str(tmp_path / "t.json")])
    big, small = out["rates"]
    assert [r["lr"] for r in out["rates"]] == [3e-2, 1e-6]
    assert len(big["minibatches"]) == 4 and big["minibatches"][0]["approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert big["after"]["policy_tokens"] == sum(20 + i - 5 for i in range(8))
    assert big["after"]["k1_mean"] > 100 * abs(small["after"]["k1_mean"])
    assert big["after"]["log_ratio_min"] < small["after"]["log_ratio_min"]
    assert small["after"]["fell_over_2_nats"] == 0
    assert (tmp_path / "t.json").exists()


def test_it_says_what_is_missing(tmp_path):
    with pytest.raises(SystemExit, match="--state"):
        ppo_trust_region.main(["--out", str(tmp_path / "t.json")])
    with pytest.raises(SystemExit, match="holds 0 episodes|expected a torch list"):
        torch.save([], tmp_path / "e.pt")
        ppo_trust_region.main(["--actor", str(tmp_path), "--episodes", str(tmp_path / "e.pt"), "--out", str(tmp_path / "t.json")])


def test_saved_rollouts_keep_their_rewards_with_keep_rewards(tmp_path):
    from dataclasses import asdict

    from cuda_agent.training.buffers import Episode

    eps = [Episode(token_ids=[1, 2, 3, 4], loss_mask=[0, 1, 1, 1], logprobs=[0.0, -0.1, -0.2, -0.3], reward=r)
           for r in (3.0, -1.0, 1.0, 2.0)]
    f = tmp_path / "rollouts_seed0_step1.pt"
    torch.save([asdict(e) for e in eps], f)  # the layout of the PPO stage's save_rollouts
    kept = ppo_trust_region.load_batch(f, 4, 0.25, seed=1, keep_rewards=True)
    assert sorted(kept.rewards.tolist()) == [-1.0, 1.0, 2.0, 3.0]
    stand_in = ppo_trust_region.load_batch(f, 4, 0.25, seed=1)
    assert sorted(stand_in.rewards.tolist())[:3] == [-1.0, -1.0, -1.0]  # one of four keeps its reward


def test_max_kl_keeps_the_update_within_the_whole_batch_limit_from_carried_moments(actor_and_episodes, tmp_path):
    """``--max-kl``: the replayed update stops at the optimizer step that took the whole batch past the limit and
    takes it back, so the policy it reports after the update is within it, where the same update without the limit
    is not. ``--moments`` starts AdamW and the warm-up position from a carried moments file."""
    from cuda_agent.training.engines.deepspeed_engine import build_train_engine
    from cuda_agent.training.engines.moments import save_moments
    from cuda_agent.training.settings import EngineSettings

    actor, episodes = actor_and_episodes
    engine = build_train_engine(load_causal_lm(TINY, seed=0), 1e-3, EngineSettings(zero_stage=0))
    ids = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))
    logits = engine(input_ids=ids).logits[:, :-1]
    engine.backward(torch.nn.functional.cross_entropy(logits.reshape(-1, 32), ids[:, 1:].reshape(-1)))
    engine.step()
    moments = save_moments(engine, tmp_path / "m.safetensors", {"actor_steps": "3"})
    common = ["--actor", str(actor), "--episodes", str(episodes), "--lr", "3e-2", "--n", "8", "--pass-share", "0.5",
              "--epochs", "2", "--minibatches", "2", "--warmup", "8", "--moments", str(moments)]
    free = ppo_trust_region.main([*common, "--out", str(tmp_path / "free.json")])["rates"][0]
    limit = free["after"]["k3_mean"] / 10
    kept = ppo_trust_region.main([*common, "--max-kl", str(limit), "--out", str(tmp_path / "kept.json")])["rates"][0]
    assert free["actor_steps_start"] == kept["actor_steps_start"] == 3 and free["actor_steps_end"] == 3 + 4
    assert free["trust"] == {} and kept["trust"]["trust_rolled_back"] == 1.0
    assert kept["minibatches"][-1]["taken_back"] and "batch_kl_k3" in kept["minibatches"][0]
    assert kept["actor_steps_end"] == 3 + kept["minibatches_stepped"] < free["actor_steps_end"]
    assert kept["after"]["k3_mean"] == pytest.approx(kept["trust"]["trust_kl_k3"], rel=1e-4)
    assert kept["after"]["k3_mean"] <= limit < free["after"]["k3_mean"]
    with pytest.raises(SystemExit, match="--max-kl"):
        ppo_trust_region.main([*common, "--max-kl", "0", "--out", str(tmp_path / "x.json")])
