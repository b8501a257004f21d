"""PPO update controls on real DeepSpeed engines on CPU: `ppo.target_kl` ends an update early, the actor warm-up ramps its rate."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.training.buffers import Episode, collate
from cuda_agent.training.engines.deepspeed_engine import build_train_engine
from cuda_agent.training.engines.models import CriticModel, load_causal_lm
from cuda_agent.training.ppo_update import Learner
from cuda_agent.training.settings import EngineSettings, PPOSettings

TINY = {"model_type": "llama", "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64}


def _batch() -> object:
    g = torch.Generator().manual_seed(0)
    eps = []
    for i, n in enumerate([20, 14, 26, 18]):
        ids = torch.randint(0, 32, (n,), generator=g).tolist()
        eps.append(Episode(ids, [0] * 4 + [1] * (n - 4), [-2.0] * n, reward=float(i % 2) * 2 - 1, turns=1))
    return collate(eps)


def _update(target_kl: float | None) -> tuple[dict[str, float], list[torch.Tensor]]:
    actor = build_train_engine(load_causal_lm(TINY, seed=0), 3e-2, EngineSettings(zero_stage=0))
    critic = build_train_engine(CriticModel(load_causal_lm(TINY, seed=1)), 1e-3, EngineSettings(zero_stage=0))
    s = PPOSettings(ppo_epochs=3, minibatches=2, is_cap=None, target_kl=target_kl)
    learner = Learner(actor, critic)
    metrics = learner.ppo_step(_batch(), s)
    rows = learner.last_minibatches  # every minibatch measured, the stopping one included
    assert len(rows) == metrics["update_minibatches"] + metrics["kl_stopped"]
    assert max(r["approx_kl"] for r in rows) == metrics["approx_kl_max"]
    assert min(r["log_ratio_min"] for r in rows) == metrics["log_ratio_min"]
    return metrics, [p.detach().clone() for p in actor.module.parameters()]


def test_without_a_target_every_epoch_and_minibatch_steps():
    m, _ = _update(None)
    assert m["update_minibatches"] == 6 and m["kl_stopped"] == 0.0
    assert m["approx_kl_max"] > 1e-4  # lr 3e-2: the later minibatches have moved
    assert m["log_ratio_min"] < 0.0 and 0.0 <= m["collapsed_frac"] <= m["collapsed_frac_max"] <= 1.0


def test_a_target_ends_the_update_at_the_first_minibatch_past_it():
    free, free_weights = _update(None)
    m, weights = _update(free["approx_kl_max"] / 10)
    assert m["kl_stopped"] == 1.0
    assert 1 <= m["update_minibatches"] < 6
    assert m["approx_kl_max"] > free["approx_kl_max"] / 10  # the minibatch that stopped it was measured, not stepped
    assert any(not torch.equal(a, b) for a, b in zip(weights, free_weights))  # fewer steps: other weights


def test_the_target_must_be_positive():
    with pytest.raises(ValueError, match="target_kl"):
        PPOSettings(target_kl=0)


def test_actor_warm_up_sets_a_rising_learning_rate_before_each_step():
    actor = build_train_engine(load_causal_lm(TINY, seed=0), 1e-2, EngineSettings(zero_stage=0))
    learner = Learner(actor, None, actor_lr_at=lambda k: 1e-2 * min(1.0, (k + 1) / 10))
    seen = []
    step = actor.step

    def recording_step():  # the rate the optimizer steps with
        seen.append(actor.optimizer.param_groups[0]["lr"])
        step()

    actor.step = recording_step
    learner.ppo_step(_batch(), PPOSettings(ppo_epochs=3, minibatches=2, is_cap=None, use_critic=False))
    assert learner.actor_steps == 6
    assert seen == pytest.approx([1e-3 * k for k in range(1, 7)])
