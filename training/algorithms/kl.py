"""KL estimators between the policy and a frozen reference, per token.

With ``log_ratio = logp - ref_logp`` (sampled tokens from the policy):
``k1 = log_ratio`` (unbiased, can be negative), ``k2 = log_ratio**2 / 2``,
``k3 = exp(-log_ratio) - 1 + log_ratio`` (unbiased, always >= 0; Schulman's
estimator). Use KL either in the reward (:func:`kl_penalized_rewards`) or as
a loss term (aggregate :func:`kl_estimate` with the policy mask).
"""

from __future__ import annotations

import torch
from torch import Tensor

KL_ESTIMATORS: tuple[str, ...] = ("k1", "k2", "k3")


def kl_estimate(logp: Tensor, ref_logp: Tensor, kind: str = "k3", clamp: float | None = 20.0) -> Tensor:
    """Per-token KL estimate ``[B, T]`` of the policy from the reference."""
    log_ratio = logp.float() - ref_logp.float()
    if clamp is not None:
        log_ratio = log_ratio.clamp(-clamp, clamp)
    if kind == "k1":
        return log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    if kind == "k3":
        return torch.exp(-log_ratio) - 1.0 + log_ratio
    raise ValueError(f"unknown KL estimator {kind!r}; valid: {', '.join(KL_ESTIMATORS)}")


def kl_penalized_rewards(rewards: Tensor, logp: Tensor, ref_logp: Tensor, mask: Tensor, coef: float, kind: str = "k1") -> Tensor:
    """``rewards - coef * KL`` on policy tokens (mask-0 positions unchanged)."""
    kl = kl_estimate(logp, ref_logp, kind)
    return torch.where(mask.bool(), rewards - coef * kl, rewards)
