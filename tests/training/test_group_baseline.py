"""Several samples per task and the group baseline: advantages measured against the other samples of the task."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.training.algorithms import discounted_returns, group_baseline_advantages, place_rewards
from cuda_agent.training.buffers import Episode, collate


def episode(reward: float, group: int | None, policy_runs: list[int]) -> Episode:
    """Tokens: 2 prompt tokens, then runs of policy tokens separated by one observation token."""
    ids, mask = [1, 2], [0, 0]
    for k, n in enumerate(policy_runs):
        if k:
            ids.append(3)
            mask.append(0)
        ids += [4] * n
        mask += [1] * n
    meta = {} if group is None else {"group": group}
    return Episode(token_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids), reward=reward, meta=meta)


def test_each_episode_is_measured_against_the_other_samples_of_its_task() -> None:
    eps = [episode(3.0, 0, [3, 2]), episode(-1.0, 0, [4]), episode(1.0, 0, [2, 2]),
           episode(-1.0, 1, [5]), episode(-1.0, 1, [1, 1])]
    batch = collate(eps)
    assert batch.groups.tolist() == [0, 0, 0, 1, 1]
    ret = discounted_returns(place_rewards(batch.mask, batch.rewards), batch.mask, 1.0)
    adv = group_baseline_advantages(ret, batch.mask, batch.groups)
    want = [3.0 - 0.0, -1.0 - 2.0, 1.0 - 1.0, 0.0, 0.0]  # leave-one-out means: (-1+1)/2, (3+1)/2, (3-1)/2, -1, -1
    for b, w in enumerate(want):
        m = batch.mask[b].bool()
        assert torch.allclose(adv[b][m], torch.full((int(m.sum()),), w)), b
        assert torch.all(adv[b][~m] == 0)
    # a task every sample fails (or passes) alike teaches nothing: its advantages are zero
    assert torch.all(adv[3:] == 0)


def test_an_episode_alone_in_its_group_is_measured_against_the_rest_of_the_batch() -> None:
    batch = collate([episode(2.0, 0, [2]), episode(-1.0, 1, [2]), episode(1.0, 1, [2])])
    ret = discounted_returns(place_rewards(batch.mask, batch.rewards), batch.mask, 1.0)
    adv = group_baseline_advantages(ret, batch.mask, batch.groups)
    m = batch.mask.bool()
    assert torch.allclose(adv[0][m[0]], torch.tensor([2.0, 2.0]))  # 2 - mean(-1, 1)
    assert torch.allclose(adv[1][m[1]], torch.tensor([-2.0, -2.0]))  # -1 - 1


def test_collate_has_no_groups_unless_every_episode_has_one() -> None:
    assert collate([episode(1.0, 0, [2]), episode(1.0, None, [2])]).groups is None
    sub = collate([episode(1.0, 4, [2]), episode(1.0, 5, [3]), episode(1.0, 4, [1])]).select([2, 0])
    assert sub.groups.tolist() == [4, 4]


def test_the_learner_uses_the_group_baseline_and_refuses_a_batch_without_groups() -> None:
    from cuda_agent.training.ppo_update import Learner
    from cuda_agent.training.settings import PPOSettings

    s = PPOSettings(baseline="group", whiten_advantages=False, use_critic=False)
    eps = [episode(3.0, 0, [2]), episode(-1.0, 0, [2])]
    batch = collate(eps)
    learner = Learner.__new__(Learner)  # advantages() needs no model
    adv, ret, metrics = learner.advantages(batch, {}, s)
    assert metrics["groups"] == 1.0
    assert torch.allclose(adv[0][batch.mask[0].bool()], torch.tensor([4.0, 4.0]))
    assert torch.allclose(ret[0][batch.mask[0].bool()], torch.tensor([3.0, 3.0]))  # the critic's targets: returns
    with pytest.raises(ValueError, match="meta\\['group'\\]"):
        learner.advantages(collate([episode(1.0, None, [2])]), {}, s)


def test_whitened_group_advantages_leave_a_group_that_failed_alike_at_zero() -> None:
    """Group 0 mixed (a short pass, long failures), group 1 failed alike. Shifting by the token-weighted mean (the
    failures outweigh the pass in tokens) handed group 1 a positive advantage on every token (session 28's steps:
    +0.1 to +0.23); scaled only, it has none and every sign is the group's own."""
    from cuda_agent.training.algorithms import masked_mean
    from cuda_agent.training.ppo_update import Learner
    from cuda_agent.training.settings import PPOSettings

    eps = [episode(1.0, 0, [2]), episode(-1.0, 0, [6]), episode(-1.0, 0, [6]),
           episode(-1.0, 1, [6]), episode(-1.0, 1, [5])]
    batch = collate(eps)
    m = batch.mask.bool()
    learner = Learner.__new__(Learner)
    adv, _, _ = learner.advantages(batch, {}, PPOSettings(baseline="group", use_critic=False))
    assert torch.all(adv[3][m[3]] == 0) and torch.all(adv[4][m[4]] == 0)
    assert torch.all(adv[0][m[0]] > 0) and torch.all(adv[1][m[1]] < 0) and torch.all(adv[2][m[2]] < 0)
    assert float(masked_mean(adv.square(), batch.mask)) == pytest.approx(1.0, rel=1e-5)  # unit scale
    raw, _, _ = learner.advantages(batch, {}, PPOSettings(baseline="group", use_critic=False, whiten_advantages=False))
    ratio = adv[m][raw[m] != 0] / raw[m][raw[m] != 0]
    assert torch.allclose(ratio, ratio[0].expand_as(ratio))  # one scale for every token: nothing shifted


def test_negative_scale_weighs_down_only_the_negative_advantages() -> None:
    from cuda_agent.training.ppo_update import Learner
    from cuda_agent.training.settings import PPOSettings

    batch = collate([episode(2.0, 0, [2]), episode(-1.0, 0, [3]), episode(-1.0, 0, [2]), episode(1.0, 1, [2]),
                     episode(1.0, 1, [4])])
    m = batch.mask.bool()
    learner = Learner.__new__(Learner)
    full, _, _ = learner.advantages(batch, {}, PPOSettings(baseline="group", use_critic=False))
    for scale in (0.0, 0.25):
        adv, _, _ = learner.advantages(batch, {}, PPOSettings(baseline="group", use_critic=False,
                                                              negative_scale=scale))
        assert torch.equal(adv[full > 0], full[full > 0])
        assert torch.allclose(adv[m & (full < 0)], scale * full[m & (full < 0)])
        assert torch.all(adv[3][m[3]] == 0)  # a group that passed alike: nothing either way
    with pytest.raises(ValueError, match="negative_scale"):
        PPOSettings(negative_scale=1.5)


def test_the_stage_config_checks_groups() -> None:
    from pydantic import ValidationError

    from cuda_agent.training.settings import PPOStageConfig

    ok = PPOStageConfig(env="kernel", episodes_per_step=32, samples_per_task=4, ppo={"baseline": "group"})
    assert ok.samples_per_task == 4
    with pytest.raises(ValidationError, match="not a multiple of samples_per_task 5"):
        PPOStageConfig(env="kernel", episodes_per_step=32, samples_per_task=5)
    with pytest.raises(ValidationError, match="set samples_per_task >= 2"):
        PPOStageConfig(env="kernel", ppo={"baseline": "group"})
    with pytest.raises(ValidationError, match="needs env 'kernel'"):
        PPOStageConfig(env="toy_single", samples_per_task=2)


def test_grouped_draws_repeat_each_task_and_groups_of_one_draw_as_before() -> None:
    from cuda_agent.errors import ConfigError
    from cuda_agent.training.stages.episodes import KernelEpisodeSource

    src = KernelEpisodeSource.__new__(KernelEpisodeSource)
    src.tasks = list(range(50))
    grouped = src._draw(12, torch.Generator().manual_seed(5), 4)
    assert len(grouped) == 12 and all(len(set(grouped[i:i + 4])) == 1 for i in range(0, 12, 4))
    plain = src._draw(6, torch.Generator().manual_seed(5), 1)
    assert plain == torch.randint(0, 50, (6,), generator=torch.Generator().manual_seed(5)).tolist()
    with pytest.raises(ConfigError, match="groups of 4"):
        src._draw(6, torch.Generator(), 4)


def test_the_learning_curve_presets_rl_stages_validate_with_groups_and_continuous_batching(tmp_path) -> None:
    """The h200 preset's RL stages (since session 28: 4 samples per task, the group baseline, continuous batching)
    are valid stage configs (validated by the real config models), and ``--set samples_per_task=1 --set
    baseline=critic --set batching=batch`` (curve step 1's recipe, the paper's critic baseline) reaches one too."""
    import sys
    from pathlib import Path

    from cuda_agent.training.settings import PPOStageConfig, ValuePretrainConfig

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import learning_curve as lc

    vp, ppo = lc.rl_stages(dict(lc.PRESETS["h200"]), tmp_path)
    cfg = PPOStageConfig.model_validate(ppo["config"])
    assert cfg.samples_per_task == 4 and cfg.ppo.baseline == "group" and cfg.rollout.batching == "continuous"
    assert ValuePretrainConfig.model_validate(vp["config"]).rollout.batching == "continuous"
    p = lc.apply_sets(dict(lc.PRESETS["h200"]), ["samples_per_task=1", "baseline=critic", "batching=batch"])
    paper = PPOStageConfig.model_validate(lc.rl_stages(p, tmp_path)[1]["config"])
    assert (paper.samples_per_task, paper.ppo.baseline, paper.rollout.batching) == (1, "critic", "batch")
    # since session 29 the preset learns from the better-than-group samples only, with a warm-up per device run
    assert (cfg.ppo.negative_scale, cfg.actor_warmup_steps) == (0.0, 4)
    p = lc.apply_sets(dict(lc.PRESETS["h200"]), ["negative_scale=1", "actor_warmup_steps=0"])
    plain = PPOStageConfig.model_validate(lc.rl_stages(p, tmp_path)[1]["config"])
    assert (plain.ppo.negative_scale, plain.actor_warmup_steps) == (1.0, 0)  # plain PPO, the full rate at once
    # since session 30: training episodes stop after 4 turns (held-out evaluations keep max_turns), 96 a step, in
    # 6 minibatches; each settable
    assert (cfg.rollout.train_max_turns, cfg.episodes_per_step, cfg.ppo.minibatches) == (4, 96, 6)
    assert lc.PRESETS["h200"]["max_turns"] == 8
    p = lc.apply_sets(dict(lc.PRESETS["h200"]), ["train_max_turns=null", "minibatches=4"])
    full = PPOStageConfig.model_validate(lc.rl_stages(p, tmp_path)[1]["config"])
    assert (full.rollout.train_max_turns, full.ppo.minibatches) == (None, 4)
