"""Rewards on tokens, GAE and Monte-Carlo returns over multi-turn episodes.

The recursion runs over policy-token positions only: observation tokens
between two turns are skipped, not decayed through. For consecutive policy
positions ``t < t'`` (``t'`` the next mask-1 position after ``t``)::

    delta_t = r_t + gamma * V_t' - V_t
    A_t     = delta_t + gamma * lam * A_t'

with ``V`` and ``A`` of the (non-existent) position after the last policy
token equal to 0. ``returns = A + V``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def last_policy_positions(mask: Tensor) -> Tensor:
    """Index of the last mask-1 position per row, ``[B]`` (-1 for rows without one)."""
    T = mask.shape[-1]
    idx = torch.arange(T, device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), idx, torch.full_like(idx, -1)).max(dim=-1).values


def turn_end_positions(mask: Tensor) -> list[list[int]]:
    """Per row, the last position of every contiguous run of mask-1 tokens (one run = one turn)."""
    m = mask.bool()
    after = torch.nn.functional.pad(m[:, 1:], (0, 1), value=False)  # is the next position a policy token?
    ends = m & ~after
    return [row.nonzero().flatten().tolist() for row in ends]


def place_rewards(
    mask: Tensor,
    outcome: Tensor,
    turn_rewards: Sequence[Sequence[float]] | None = None,
) -> Tensor:
    """Token rewards ``[B, T]``: the outcome on each row's last policy token.

    :param mask: ``[B, T]`` policy-token mask.
    :param outcome: ``[B]`` episode rewards (from the trusted grading).
    :param turn_rewards: optional per-row list of per-turn rewards, added on the
        last policy token of each turn (turn = contiguous run of mask-1 tokens);
        a row may list fewer rewards than it has turns (the rest get 0).
    """
    rewards = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    last = last_policy_positions(mask)
    rows = torch.arange(mask.shape[0], device=mask.device)
    has = last >= 0
    rewards[rows[has], last[has]] += outcome.to(rewards.dtype).to(mask.device)[has]
    if turn_rewards is not None:
        ends = turn_end_positions(mask)
        if len(turn_rewards) != mask.shape[0]:
            raise ValueError(f"turn_rewards has {len(turn_rewards)} rows, the batch has {mask.shape[0]}")
        for b, (row_ends, row_rewards) in enumerate(zip(ends, turn_rewards)):
            if len(row_rewards) > len(row_ends):
                raise ValueError(
                    f"row {b}: {len(row_rewards)} turn rewards but only {len(row_ends)} policy turns in the mask"
                )
            for pos, r in zip(row_ends, row_rewards):
                rewards[b, pos] += float(r)
    return rewards


@torch.no_grad()
def discounted_reverse_cumsum(x: Tensor, c: float, block: int = 128) -> Tensor:
    """``y[:, t] = sum_{k >= t} c**(k - t) * x[:, k]`` along the last dimension, without a loop over positions.

    ``c == 1`` is a reversed cumulative sum. Otherwise positions are cut into blocks of ``block``: one
    float64 matmul with the ``block x block`` matrix of ``c**(k - t)`` gives every in-block sum (no
    power beyond ``c**block``, so nothing underflows), then a loop over blocks (``T / block`` steps of
    ``[B]``-sized work) carries each block's start value backwards.
    """
    B, T = x.shape
    if T == 0:
        return x.clone()
    x64 = x.double()
    if c == 1.0:
        return (x64.flip(-1).cumsum(-1).flip(-1)).to(x.dtype)
    nb = -(-T // block)
    xp = torch.nn.functional.pad(x64, (0, nb * block - T)).view(B, nb, block)
    k = torch.arange(block, device=x.device, dtype=torch.float64)
    expo = k[None, :] - k[:, None]  # [t, k] = k - t
    decay = torch.where(expo >= 0, torch.tensor(c, dtype=torch.float64, device=x.device) ** expo.clamp(min=0),
                        torch.zeros((), dtype=torch.float64, device=x.device))
    local = xp @ decay.T  # [B, nb, block]: sums inside each block
    tail = c ** (block - k)  # weight of the next block's start value at in-block position t
    out = torch.empty_like(local)
    carry = torch.zeros(B, dtype=torch.float64, device=x.device)
    for b in range(nb - 1, -1, -1):
        out[:, b] = local[:, b] + tail[None, :] * carry[:, None]
        carry = out[:, b, 0]
    return out.reshape(B, nb * block)[:, :T].to(x.dtype)


def compute_gae(
    rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Advantages and returns ``[B, T]`` (0 at mask-0 positions), skipping observation tokens.

    Rewards at mask-0 positions are ignored (place rewards on policy tokens). Vectorised: each row's
    policy tokens are gathered in order into a dense ``[B, N]`` sequence (observations drop out, so
    nothing decays through them), the TD errors are formed there, and
    :func:`discounted_reverse_cumsum` with ``gamma * lam`` gives the advantages, scattered back.
    """
    rewards = rewards.float()
    values = values.float()
    m = mask.bool()
    B, T = rewards.shape
    adv = torch.zeros_like(rewards)
    n = int(m.sum(-1).max()) if m.numel() else 0
    if n == 0:
        return adv, torch.zeros_like(adv)
    # Policy positions first, in time order (stable sort on "is observation").
    pos = torch.sort((~m).to(torch.int32), dim=-1, stable=True).indices[:, :n]
    valid = torch.gather(m, 1, pos)
    r = torch.where(valid, torch.gather(rewards, 1, pos), 0.0)
    v = torch.where(valid, torch.gather(values, 1, pos), 0.0)
    v_next = torch.nn.functional.pad(v[:, 1:], (0, 1))  # the value after the last policy token is 0
    delta = r + gamma * v_next - v
    a = discounted_reverse_cumsum(delta, gamma * lam)
    adv.scatter_(1, pos, torch.where(valid, a, 0.0))  # invalid slots point at observation positions: they stay 0
    returns = torch.where(m, adv + values, torch.zeros_like(adv))
    return adv, returns


@torch.no_grad()
def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """Monte-Carlo returns over policy tokens (GAE with lam=1 and V=0): the critic's pretraining target."""
    _, ret = compute_gae(rewards, torch.zeros_like(rewards, dtype=torch.float32), mask, gamma=gamma, lam=1.0)
    return ret


def group_baseline_advantages(returns: Tensor, mask: Tensor, groups: Tensor) -> Tensor:
    """Advantages against the other samples of the same task: per episode, its return at each policy token minus
    the mean episode return (the return at its first policy token) of the other episodes of its group
    (leave-one-out, as RLOO). An episode alone in its group gets its return minus the batch's mean episode return
    (the other episodes', when there are any). ``groups``: ``[B]`` ids; zero where ``mask`` is 0."""
    B = returns.shape[0]
    has = mask.bool().any(-1)
    first = torch.where(has, mask.float().argmax(-1), torch.zeros_like(groups))
    episode = returns.gather(1, first[:, None])[:, 0] * has.float()  # [B]
    same = (groups[:, None] == groups[None, :]) & has[None, :] & has[:, None]
    same.fill_diagonal_(False)
    n_same = same.sum(-1)
    others = has[None, :].expand(B, B).clone()
    others.fill_diagonal_(False)
    n_others = others.sum(-1)
    mean_same = (same.float() @ episode) / n_same.clamp(min=1)
    mean_others = (others.float() @ episode) / n_others.clamp(min=1)
    baseline = torch.where(n_same > 0, mean_same, torch.where(n_others > 0, mean_others, torch.zeros_like(episode)))
    return (returns - baseline[:, None]) * mask
