"""``ppo.max_kl``, the whole-batch trust region of a PPO step (training/trust_region.py, training/engines/snapshot.py):
real DeepSpeed engines on CPU (ZeRO 0, 1, 2; fp32 and bf16), torch AdamW, the trainer's own ``Learner.ppo_step``.

A step within the limit is the plain update; the optimizer step that takes the batch's k3 past it is taken back:
weights, master weights, Adam moments and step counts, the warm-up position, bit for bit, so the next step is the
one an engine that never took it takes."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.training.buffers import Episode, collate
from cuda_agent.training.engines.deepspeed_engine import build_frozen_engine, build_train_engine
from cuda_agent.training.engines.models import CriticModel, load_causal_lm
from cuda_agent.training.engines.moments import read_moments, read_moments_file, save_moments
from cuda_agent.training.engines.snapshot import EngineSnapshot
from cuda_agent.training.ppo_update import Learner, linear_warmup
from cuda_agent.training.settings import EngineSettings, PPOSettings
from cuda_agent.training.trust_region import batch_drift

TINY = {"model_type": "llama", "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64}

ENGINES = {
    "zero0": EngineSettings(zero_stage=0),
    "zero1": EngineSettings(zero_stage=1),
    "zero2": EngineSettings(zero_stage=2),
    "zero1-bf16": EngineSettings(zero_stage=1, dtype="bf16"),  # the learning curve's h200 engine
    "zero2-bf16": EngineSettings(zero_stage=2, dtype="bf16"),
    "zero0-bf16-fp32-masters": EngineSettings(zero_stage=0, dtype="bf16"),  # DeepSpeed's stage-0 bf16 optimizer
    "zero0-native-bf16": EngineSettings(zero_stage=0, dtype="bf16", master_weights="bf16"),
}
LR = 3e-3


def _batch(seed: int = 0) -> object:
    g = torch.Generator().manual_seed(seed)
    eps = []
    for i, n in enumerate([20, 14, 26, 18]):
        ids = torch.randint(0, 32, (n,), generator=g).tolist()
        eps.append(Episode(ids, [0] * 4 + [1] * (n - 4), [-2.0] * n, reward=float(i % 2) * 2 - 1, turns=1))
    return collate(eps)


def _settings(max_kl: float | None, **kw) -> PPOSettings:
    return PPOSettings(**{"ppo_epochs": 2, "minibatches": 2, "is_cap": None, "use_critic": False, "max_kl": max_kl,
                          **kw})


def _learner(es: EngineSettings, warmup: int = 0, critic: bool = False) -> Learner:
    torch.manual_seed(0)
    actor = build_train_engine(load_causal_lm(TINY, seed=0), LR, es)
    crit = build_train_engine(CriticModel(load_causal_lm(TINY, seed=1)), 1e-3, es) if critic else None
    return Learner(actor, crit, actor_lr_at=linear_warmup(LR, warmup) if warmup else None)


def _state(learner: Learner) -> dict[str, object]:
    """Everything a step changes, copied: module weights, the optimizer's parameters (masters) and state, lr, steps."""
    e = learner.actor
    opt = e.optimizer if isinstance(e.optimizer, torch.optim.Optimizer) else e.optimizer.optimizer
    return {
        "weights": {k: v.detach().clone() for k, v in e.module.state_dict().items()},
        "masters": [p.detach().clone() for g in opt.param_groups for p in g["params"]],
        "adam": [{k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in opt.state[p].items()}
                 for g in opt.param_groups for p in g["params"] if p in opt.state],
        "lr": [g["lr"] for g in opt.param_groups],
        "actor_steps": learner.actor_steps,
        "global_steps": e.global_steps,
    }


def _equal(a: object, b: object) -> bool:
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("name", list(ENGINES))
def test_a_step_past_the_limit_is_taken_back_bit_for_bit_and_the_next_step_is_a_twins(name):
    """An engine with Adam state and a warm-up under way takes a step whose first optimizer step already goes past
    the limit: weights, masters, Adam moments and step counts, learning rate, warm-up position and DeepSpeed's step
    counter are exactly as before. Its next step then equals, bit for bit, the step of a twin that never took it."""
    es = ENGINES[name]
    learner, twin = _learner(es, warmup=8), _learner(es, warmup=8)
    for lrn in (learner, twin):
        lrn.ppo_step(_batch(1), _settings(None))  # Adam state exists, the warm-up is 4 steps in
    before = _state(learner)
    assert _equal(before, _state(twin)) and before["adam"]  # the twins agree; there is state to restore
    m = learner.ppo_step(_batch(2), _settings(1e-12))
    assert m["trust_rolled_back"] == 1.0 and m["trust_minibatches_kept"] == 0.0 and m["update_minibatches"] == 0.0
    assert m["trust_rejected_kl_k3"] > 1e-12 and (m["trust_kl_k3"], m["trust_max_drop"]) == (0.0, 0.0)
    assert _equal(_state(learner), before)
    assert [r.get("trust_rolled_back") for r in learner.last_minibatches] == [1.0]  # the update ended there
    for lrn in (learner, twin):
        lrn.ppo_step(_batch(3), _settings(None))
    assert _equal(_state(learner), _state(twin))


@pytest.mark.parametrize("name", ["zero0", "zero1-bf16", "zero2"])
def test_a_first_step_taken_back_leaves_a_fresh_adam(name):
    """A rollback of the first step ever: the optimizer has no state again (AdamW creates it at its first step), so
    the next step is a first step, as a fresh engine's."""
    learner, fresh = _learner(ENGINES[name]), _learner(ENGINES[name])
    learner.ppo_step(_batch(2), _settings(1e-12))
    assert _equal(_state(learner), _state(fresh)) and not _state(learner)["adam"]
    for lrn in (learner, fresh):
        lrn.ppo_step(_batch(3), _settings(None))
    assert _equal(_state(learner), _state(fresh))


@pytest.mark.parametrize("name", ["zero0", "zero1-bf16", "zero2"])
def test_a_step_within_the_limit_is_the_plain_update(name):
    """A limit the step never reaches changes nothing: the same weights and Adam state as without one, every
    minibatch kept, and the step reports the whole batch's k3 and k1 after its last optimizer step."""
    plain, guarded = _learner(ENGINES[name]), _learner(ENGINES[name])
    batch = _batch(2)
    m0 = plain.ppo_step(batch, _settings(None))
    m = guarded.ppo_step(batch, _settings(1e6))
    assert _equal(_state(plain), _state(guarded))
    assert m["trust_rolled_back"] == 0.0 and m["trust_minibatches_kept"] == 4.0 == m["update_minibatches"]
    assert m["policy_loss"] == m0["policy_loss"] and "trust_kl_k3" not in m0
    rows = guarded.last_minibatches
    assert [r["batch_kl_k3"] for r in rows][-1] == m["trust_kl_k3"] > 0.0
    assert rows[-1]["batch_max_drop"] == m["trust_max_drop"] > 0.0 and m["trust_snapshot_mib"] > 0.0
    # the measure is the policy's own distance from the rollout batch, from scratch
    fresh = _learner(ENGINES[name])  # the actor the rollout batch was scored with
    d = batch_drift(guarded.policy_logp(batch, 2), fresh.policy_logp(batch, 2), batch.mask)
    assert (d["k3"], d["k1"], d["max_drop"]) == (m["trust_kl_k3"], m["trust_kl_k1"], m["trust_max_drop"])


def test_the_update_keeps_the_minibatches_before_the_one_past_the_limit():
    """With a limit between the whole-batch k3 after the second and the third optimizer step, the step keeps two:
    the policy is the one measured after the second step (its k3 reported), the warm-up position and DeepSpeed's
    counter say two steps, and the critic stepped with the two kept minibatches only."""
    es = ENGINES["zero1"]
    free = _learner(es, warmup=4, critic=True)
    batch = _batch(2)
    free.ppo_step(batch, _settings(1e6, use_critic=True))
    k3 = [r["batch_kl_k3"] for r in free.last_minibatches]
    assert k3[1] < k3[2], k3  # the policy keeps moving away from the rollout batch
    limit = (k3[1] + k3[2]) / 2
    learner = _learner(es, warmup=4, critic=True)
    m = learner.ppo_step(batch, _settings(limit, use_critic=True))
    assert m["trust_rolled_back"] == 1.0 and m["trust_minibatches_kept"] == 2.0 == m["update_minibatches"]
    assert m["trust_kl_k3"] == k3[1] and m["trust_rejected_kl_k3"] == k3[2]
    assert learner.actor_steps == 2 and learner.actor.global_steps == 2 and learner.critic.global_steps == 2
    assert learner.actor.optimizer.param_groups[0]["lr"] == pytest.approx(LR * 2 / 4)  # the kept step's rate
    fresh = _learner(es)
    assert batch_drift(learner.policy_logp(batch, 2), fresh.policy_logp(batch, 2), batch.mask)["k3"] == k3[1]
    assert [("trust_rolled_back" in r) for r in learner.last_minibatches] == [False, False, True]


def test_the_moments_saved_after_a_rollback_are_those_before_the_step(tmp_path):
    """The PPO stage writes the actor's moments (and ``actor_steps``) after its steps: after a rollback they are the
    optimizer state from before the rejected step, in memory and in the file."""
    learner = _learner(ENGINES["zero1-bf16"], warmup=8)
    learner.ppo_step(_batch(1), _settings(None))
    before = read_moments(learner.actor)
    save_moments(learner.actor, tmp_path / "before.safetensors", {"actor_steps": str(learner.actor_steps)})
    assert learner.ppo_step(_batch(2), _settings(1e-12))["trust_rolled_back"] == 1.0
    after = read_moments(learner.actor)
    assert _equal(after.exp_avg, before.exp_avg) and _equal(after.exp_avg_sq, before.exp_avg_sq)
    assert after.steps == before.steps == dict.fromkeys(before.steps, 4)
    save_moments(learner.actor, tmp_path / "after.safetensors", {"actor_steps": str(learner.actor_steps)})
    (m0, meta0), (m1, meta1) = (read_moments_file(tmp_path / f"{t}.safetensors") for t in ("before", "after"))
    assert meta1["actor_steps"] == meta0["actor_steps"] == "4"
    assert _equal(m1.exp_avg, m0.exp_avg) and _equal(m1.exp_avg_sq, m0.exp_avg_sq) and m1.steps == m0.steps


def test_the_trust_region_works_beside_target_kl():
    """target_kl stops before a minibatch's step, max_kl measures after each step: the minibatch target_kl stops is
    neither stepped nor measured, and the steps before it are kept and measured."""
    learner = _learner(ENGINES["zero0"])
    m = learner.ppo_step(_batch(2), _settings(1e6, target_kl=1e-9))
    rows = learner.last_minibatches
    # on-policy, the first minibatch's k3 before its step is ~0: it steps; the second sees the first's step and stops
    assert m["kl_stopped"] == 1.0 and m["update_minibatches"] == 1.0 == m["trust_minibatches_kept"]
    assert m["trust_rolled_back"] == 0.0 and m["trust_kl_k3"] == rows[0]["batch_kl_k3"] > 0.0
    assert len(rows) == 2 and "batch_kl_k3" not in rows[1] and rows[1]["kl_stopped"] == 1.0


def test_snapshots_refuse_an_engine_without_optimizer_and_the_limit_must_be_positive():
    frozen = build_frozen_engine(load_causal_lm(TINY, seed=0), EngineSettings(zero_stage=0))
    with pytest.raises(ValueError, match="no optimizer"):
        EngineSnapshot(frozen)
    with pytest.raises(ValueError, match="max_kl"):
        PPOSettings(max_kl=0)
    assert PPOSettings().max_kl is None  # off unless set: existing configs step as before


def test_the_learning_curves_h200_recipe_takes_the_trust_region_and_records_it(tmp_path):
    """The h200 preset steps with max_kl 0.1 (a recipe key, kept on each PPO row; ``--set max_kl=null`` turns it
    off; cpu_tiny has none), and a run's trust-region figures reach records_rl.json."""
    import json
    import sys
    from pathlib import Path

    from cuda_agent.training.settings import PPOStageConfig

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import learning_curve as lc
    from _learning_curve_report import collect_rl_step, merge_rl_step

    def max_kl(p):
        return PPOStageConfig.model_validate(lc.rl_stages(p, tmp_path)[1]["config"]).ppo.max_kl

    assert max_kl(dict(lc.PRESETS["h200"])) == 0.1 and lc.ppo_recipe(lc.PRESETS["h200"])["max_kl"] == 0.1
    assert max_kl(lc.apply_sets(dict(lc.PRESETS["h200"]), ["max_kl=null"])) is None
    assert max_kl(dict(lc.PRESETS["cpu_tiny"])) is None and lc.ppo_recipe(lc.PRESETS["cpu_tiny"])["max_kl"] is None
    run = tmp_path / "rl_seed0"
    run.mkdir()
    row = {"stage": "ppo_agentic", "step": 1, "trust_kl_k3": 0.018, "trust_rolled_back": 1.0,
           "trust_minibatches_kept": 2.0, "trust_rejected_kl_k3": 8.97, "trust_max_drop": 3.1}
    (run / "metrics.jsonl").write_text(json.dumps(row) + "\n")
    merged = merge_rl_step({}, collect_rl_step(tmp_path, {0: 1}), {0: 1}, lc.ppo_recipe(lc.PRESETS["h200"]))
    kept = merged["train_metrics"]["0"][0]
    assert {k: kept[k] for k in row if k.startswith("trust_")} == {k: v for k, v in row.items() if k.startswith("trust_")}
    assert kept["recipe"]["max_kl"] == 0.1


def test_a_ppo_stage_whose_steps_are_all_taken_back_carries_the_moments_it_started_from(tmp_path):
    """End to end through the PPO stage (toy env, ZeRO-1): run 1 saves its actor and moments; run 2 continues from
    them with a limit every step passes at once. Its actor is run 1's bit for bit, and the moments it saves are the
    ones it loaded (optimizer-step count and warm-up position included), not those of the steps it took back."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    from cuda_agent.config import load_config
    from cuda_agent.training.config import TrainConfig
    from cuda_agent.training.runner import run_training

    configs = Path(__file__).resolve().parents[2] / "configs" / "train"
    block = ("{{name: ppo_agentic, config: {{env: toy_two_turn, steps: {steps}, episodes_per_step: 8, actor_lr: 3.0e-3, "
             "critic_lr: 3.0e-3, actor_warmup_steps: 3, save_actor_moments: true, ppo: {{minibatches: 2{ppo}}}{extra}}}}}")

    def run(name: str, *overrides: str) -> dict:
        return run_training(load_config(TrainConfig, [configs / "ci_toy_chain.yaml"],
                                        [f"run_dir={tmp_path / name}", "engine.zero_stage=1", *overrides]))

    first = run("r1", f"stages=[{block.format(steps=2, ppo='', extra='')}]")
    carried = f", init_actor_moments: '{first['actor_moments']}'"
    second = run("r2", f"model={first['actor']}", f"stages=[{block.format(steps=2, ppo=', max_kl: 1.0e-9', extra=carried)}]")
    rows = [json.loads(line) for line in (tmp_path / "r2" / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "trust_rolled_back" in r]
    assert len(rows) == 2 and all(r["trust_rolled_back"] == 1.0 and r["update_minibatches"] == 0.0 for r in rows)
    w1, w2 = (load_file(str(Path(o["actor"]) / "model.safetensors")) for o in (first, second))
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)
    (m1, meta1), (m2, meta2) = (read_moments_file(Path(o["actor_moments"])) for o in (first, second))
    assert meta2["actor_steps"] == meta1["actor_steps"] and m2.steps == m1.steps
    for name in m1.exp_avg:  # the loaded (unpacked) moments packed again: the same codes up to float rounding
        assert torch.allclose(m2.exp_avg[name], m1.exp_avg[name], rtol=1e-3, atol=1e-12)
        assert torch.allclose(m2.exp_avg_sq[name], m1.exp_avg_sq[name], rtol=1e-3, atol=1e-20)
