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
    out: list[list[int]] = []
    m = mask.bool().tolist()
    for row in m:
        ends = [t for t in range(len(row)) if row[t] and (t + 1 == len(row) or not row[t + 1])]
        out.append(ends)
    return out


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
def compute_gae(
    rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Advantages and returns ``[B, T]`` (0 at mask-0 positions), skipping observation tokens.

    Rewards at mask-0 positions are ignored (place rewards on policy tokens).
    """
    rewards = rewards.float()
    values = values.float()
    m = mask.bool()
    B, T = rewards.shape
    adv = torch.zeros_like(rewards)
    next_value = torch.zeros(B, dtype=rewards.dtype, device=rewards.device)
    next_adv = torch.zeros_like(next_value)
    for t in range(T - 1, -1, -1):
        mt = m[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        a = delta + gamma * lam * next_adv
        adv[:, t] = torch.where(mt, a, torch.zeros_like(a))
        next_adv = torch.where(mt, a, next_adv)
        next_value = torch.where(mt, values[:, t], next_value)
    returns = torch.where(m, adv + values, torch.zeros_like(adv))
    return adv, returns


@torch.no_grad()
def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """Monte-Carlo returns over policy tokens (GAE with lam=1 and V=0): the critic's pretraining target."""
    _, ret = compute_gae(rewards, torch.zeros_like(rewards, dtype=torch.float32), mask, gamma=gamma, lam=1.0)
    return ret
