"""Algorithms against hand-computed literal values (worked out in the comments)."""

from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.training.algorithms import (
    aggregate,
    compute_gae,
    discounted_returns,
    explained_variance,
    kl_estimate,
    kl_penalized_rewards,
    logprobs_and_entropy,
    masked_mean,
    masked_var,
    masked_whiten,
    place_rewards,
    policy_loss,
    sequence_lengths,
    value_loss,
)

T = torch.tensor


def close(a, b, tol=1e-6):
    assert torch.allclose(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32), atol=tol), (a, b)


def test_gae_skips_observation_tokens_without_decay():
    # turn 1 = positions 0,1; observation = 2,3 (values 9 are garbage and must be ignored); turn 2 = 4,5
    mask = T([[1, 1, 0, 0, 1, 1]])
    values = T([[0.5, 0.6, 9.0, 9.0, 0.7, 0.8]])
    rewards = place_rewards(mask, T([1.0]))
    close(rewards, [[0, 0, 0, 0, 0, 1.0]])
    adv, ret = compute_gae(rewards, values, mask, gamma=0.9, lam=0.8)
    # t5: d=1-0.8=0.2, A=0.2
    # t4: d=0.9*0.8-0.7=0.02, A=0.02+0.72*0.2=0.164
    # t1 (next policy pos is 4): d=0.9*0.7-0.6=0.03, A=0.03+0.72*0.164=0.14808
    # t0: d=0.9*0.6-0.5=0.04, A=0.04+0.72*0.14808=0.1466176
    close(adv, [[0.1466176, 0.14808, 0, 0, 0.164, 0.2]])
    close(ret, [[0.6466176, 0.74808, 0, 0, 0.864, 1.0]])


def test_gae_batch_rows_are_independent_and_padding_is_ignored():
    mask = T([[1, 1, 0], [1, 0, 0]])
    values = T([[0.0, 0.0, 5.0], [0.25, 7.0, 7.0]])
    rewards = place_rewards(mask, T([1.0, -1.0]))
    close(rewards, [[0, 1, 0], [-1, 0, 0]])
    adv, ret = compute_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    close(adv, [[1, 1, 0], [-1.25, 0, 0]])
    close(ret, [[1, 1, 0], [-1, 0, 0]])


def test_turn_rewards_land_on_each_turns_last_token():
    mask = T([[1, 1, 0, 0, 1, 1]])
    r = place_rewards(mask, T([2.0]), turn_rewards=[[0.5]])
    close(r, [[0, 0.5, 0, 0, 0, 2.0]])
    r = place_rewards(mask, T([2.0]), turn_rewards=[[0.5, 0.25]])
    close(r, [[0, 0.5, 0, 0, 0, 2.25]])
    with pytest.raises(ValueError, match="turn rewards"):
        place_rewards(mask, T([2.0]), turn_rewards=[[1, 2, 3]])


def test_monte_carlo_returns_skip_observations():
    mask = T([[1, 0, 1, 1]])
    r = place_rewards(mask, T([4.0]))
    # t3=4, t2=0.5*4=2, t0=0.5*2=1 (position 1 is an observation: no decay)
    close(discounted_returns(r, mask, gamma=0.5), [[1, 0, 2, 4]])


def test_masked_statistics_ignore_mask0_even_nan():
    v = T([1.0, 2.0, 3.0, float("nan")])
    m = T([1, 1, 1, 0])
    close(masked_mean(v, m), 2.0)
    close(masked_var(v, m), 1.0)  # (1+0+1)/(3-1)
    close(masked_whiten(v, m), [-1.0, 0.0, 1.0, 0.0], tol=1e-5)
    close(sequence_lengths(T([[1, 1, 0], [0, 0, 0]])), [2, 0])


def test_aggregation_modes():
    loss = T([[1.0, 2.0, 3.0], [4.0, 99.0, 99.0]])
    mask = T([[1, 1, 1], [1, 0, 0]])
    close(aggregate(loss, mask, "token_mean"), 2.5)  # (1+2+3+4)/4
    close(aggregate(loss, mask, "seq_mean_token_mean"), 3.0)  # (2+4)/2
    close(aggregate(loss, mask, "seq_mean_token_sum"), 5.0)  # (6+4)/2
    with pytest.raises(ValueError, match="valid: token_mean"):
        aggregate(loss, mask, "mean")


def _ppo_inputs():
    logp = torch.log(T([[1.5, 0.5, 0.5, 1.0, 3.0]]))
    old = torch.zeros(1, 5)
    adv = T([[1.0, 1.0, -1.0, 2.0, 100.0]])
    mask = T([[1, 1, 1, 1, 0]])
    return logp, old, adv, mask


def test_clipped_policy_loss():
    logp, old, adv, mask = _ppo_inputs()
    # ratios 1.5, 0.5, 0.5, 1.0 -> per token max(-rA, -clip(r)A): -1.2 (clipped), -0.5, 0.8 (clipped), -2
    loss, m = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2)
    close(loss, (-1.2 - 0.5 + 0.8 - 2.0) / 4)
    assert m["clip_frac"] == pytest.approx(0.5)
    # asymmetric clip (clip-higher): ratio 1.5 with clip_high 0.6 is not clipped -> -1.5
    loss, _ = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.6)
    close(loss, (-1.5 - 0.5 + 0.8 - 2.0) / 4)


def test_collapsed_tokens_are_counted_apart_from_the_mean_kl():
    old = T([[0.0, -0.01, -0.01, -0.01, -0.01, -0.01]])
    # token 1 fell from p=0.99 to 1e-5 (log-ratio -11.5), token 2 by 1.5 nats (not collapsed), token 5 is not the
    # policy's: its fall of 30 nats is masked out
    logp = T([[0.0, math.log(1e-5), -1.51, -0.01, -0.01, -30.0]])
    mask = T([[0, 1, 1, 1, 1, 0]])
    _, m = policy_loss(logp, old, torch.ones_like(old), mask)
    assert m["collapsed_frac"] == pytest.approx(1 / 4)
    assert m["log_ratio_min"] == pytest.approx(math.log(1e-5) + 0.01, abs=1e-4)
    assert m["approx_kl"] > 20  # the k3 mean: one collapsed token in four dominates it
    _, calm = policy_loss(old, old, torch.ones_like(old), mask)
    assert calm["collapsed_frac"] == 0.0 and calm["log_ratio_min"] == 0.0


def test_importance_ratio_correction_between_rollout_and_training_logprobs():
    logp, old, adv, mask = _ppo_inputs()
    rollout = T([[-math.log(2), 0.0, 0.0, math.log(2), 0.0]])
    # weights min(exp(old - rollout), 1.5) = 1.5 (from 2), 1, 1, 0.5
    loss, m = policy_loss(logp, old, adv, mask, rollout_logp=rollout, is_cap=1.5)
    close(loss, (-1.2 * 1.5 - 0.5 + 0.8 - 2.0 * 0.5) / 4)
    assert m["is_weight_mean"] == pytest.approx(4.0 / 4)


def test_policy_loss_gradient_flows_only_through_policy_tokens():
    logp, old, adv, mask = _ppo_inputs()
    logp = logp.clone().requires_grad_(True)
    loss, _ = policy_loss(logp, old, adv, mask)
    loss.backward()
    # d/dlogp of -rA/4 = -rA/4 where unclipped was chosen; 0 where the clipped branch won
    close(logp.grad, [[0.0, -0.125, 0.0, -0.5, 0.0]])


def test_clipped_value_loss():
    values = T([[1.0, 0.0, 50.0]])
    old = T([[0.5, 0.5, 0.0]])
    returns = T([[2.0, 0.0, 0.0]])
    mask = T([[1, 1, 0]])
    # tok0: err 1, clipped V 0.7 -> 1.69 -> 0.845; tok1: err 0, clipped V 0.3 -> 0.09 -> 0.045
    loss, m = value_loss(values, old, returns, mask, clip=0.2)
    close(loss, (0.845 + 0.045) / 2)
    assert m["vf_clip_frac"] == pytest.approx(1.0)
    loss, _ = value_loss(values, old, returns, mask, clip=None)
    close(loss, (0.5 + 0.0) / 2)


def test_kl_estimators():
    logp = torch.log(T([[0.5]]))
    ref = torch.log(T([[0.25]]))
    ln2 = math.log(2)
    close(kl_estimate(logp, ref, "k1"), [[ln2]])
    close(kl_estimate(logp, ref, "k2"), [[0.5 * ln2**2]])
    close(kl_estimate(logp, ref, "k3"), [[0.5 - 1 + ln2]])
    with pytest.raises(ValueError, match="k1, k2, k3"):
        kl_estimate(logp, ref, "k4")


def test_kl_in_reward_only_on_policy_tokens():
    rewards = T([[0.0, 1.0, 0.0]])
    logp = torch.log(T([[0.5, 0.5, 0.5]]))
    ref = torch.log(T([[0.25, 0.25, 0.25]]))
    out = kl_penalized_rewards(rewards, logp, ref, T([[1, 1, 0]]), coef=0.1, kind="k1")
    close(out, [[-0.1 * math.log(2), 1 - 0.1 * math.log(2), 0.0]])


def test_explained_variance():
    ret = T([[1.0, 2.0, 3.0, 0.0]])
    mask = T([[1, 1, 1, 0]])
    assert explained_variance(ret, ret, mask) == pytest.approx(1.0)
    assert explained_variance(T([[2.0, 2.0, 2.0, 9.0]]), ret, mask) == pytest.approx(0.0)
    assert math.isnan(explained_variance(ret, T([[1.0, 1.0, 1.0, 0.0]]), mask))


def test_logprobs_and_entropy_from_logits():
    logits = torch.log(T([[[0.5, 0.5], [0.25, 0.75]]]))
    targets = T([[0, 1]])
    logp, ent = logprobs_and_entropy(logits, targets, chunk=1)
    close(logp, [[math.log(0.5), math.log(0.75)]])
    close(ent, [[math.log(2), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]])


def _gae_by_recursion(rewards, values, mask, gamma, lam):
    """The module docstring's recursion, one position at a time (the oracle for the vectorised version)."""
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        next_v = next_a = 0.0
        for t in range(T - 1, -1, -1):
            if mask[b, t]:
                a = float(rewards[b, t]) + gamma * next_v - float(values[b, t]) + gamma * lam * next_a
                adv[b, t] = a
                next_a, next_v = a, float(values[b, t])
    ret = torch.where(mask.bool(), adv + values.double(), torch.zeros_like(adv))
    return adv, ret


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.99, 0.95), (1.0, 0.9), (0.5, 0.0)])
def test_vectorised_gae_matches_the_recursion_on_long_multi_turn_rows(gamma, lam):
    from cuda_agent.training.algorithms.gae import compute_gae

    g = torch.Generator().manual_seed(7)
    B, T = 3, 700
    mask = torch.rand(B, T, generator=g) < 0.6
    mask[2] = False  # a row with no policy tokens
    mask[1, :300] = False  # a long observation stretch
    rewards = torch.randn(B, T, generator=g)  # also on observation positions: must be ignored
    values = torch.randn(B, T, generator=g)
    adv, ret = compute_gae(rewards, values, mask, gamma, lam)
    want_adv, want_ret = _gae_by_recursion(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(adv.double(), want_adv, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ret.double(), want_ret, rtol=1e-4, atol=1e-4)
    assert adv.dtype == torch.float32 and bool((adv[~mask] == 0).all())


@pytest.mark.parametrize("block", [1, 8, 128, 1024])
def test_discounted_reverse_cumsum_is_exact_across_block_borders(block):
    from cuda_agent.training.algorithms.gae import discounted_reverse_cumsum

    x = torch.randn(2, 300, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    c = 0.97
    want = torch.zeros_like(x)
    acc = torch.zeros(2, dtype=torch.float64)
    for t in range(299, -1, -1):
        acc = x[:, t] + c * acc
        want[:, t] = acc
    torch.testing.assert_close(discounted_reverse_cumsum(x, c, block=block), want, rtol=1e-10, atol=1e-10)


def test_turn_end_positions_are_the_last_token_of_each_policy_run():
    from cuda_agent.training.algorithms.gae import turn_end_positions

    mask = torch.tensor([[0, 1, 1, 0, 1, 0, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1], [0] * 8])
    assert turn_end_positions(mask) == [[2, 4, 7], [7], []]
