"""Clipped PPO policy loss with importance-ratio correction, clipped value loss.

Three log-probs meet here: ``rollout_logp`` (what the sampling engine, e.g.
vLLM or a bf16 generate, reported), ``old_logp`` (the training engine's
recomputation before the update) and ``logp`` (current, with gradient). PPO's
ratio is ``exp(logp - old_logp)``; the mismatch between the engines is
corrected by a truncated importance weight ``min(exp(old_logp - rollout_logp), cap)``
(detached) multiplying each token's loss.
"""

from __future__ import annotations

import torch
from torch import Tensor

from cuda_agent.training.algorithms.masked import aggregate, masked_mean, masked_var


#: A token counts as collapsed in ``collapsed_frac`` when its log-prob fell by more than this (nats).
COLLAPSED_LOG_RATIO = -2.0


def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    aggregation: str = "token_mean",
    rollout_logp: Tensor | None = None,
    is_cap: float | None = 2.0,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped surrogate ``-min(r A, clip(r, 1-clip_low, 1+clip_high) A)`` aggregated over the mask.

    :param rollout_logp: sampling-engine log-probs; when given (and ``is_cap``
        is not None) each token's loss is weighted by the truncated importance
        ratio ``min(exp(old_logp - rollout_logp), is_cap)``.
    :returns: ``(loss, metrics)`` with ``clip_frac`` (share of policy tokens
        whose clipped term was chosen), ``approx_kl`` (mean k3 of old vs new),
        ``ratio_mean``, ``is_weight_mean``, ``log_ratio_min`` (the largest fall
        of one token's log-prob) and ``collapsed_frac`` (share of policy tokens
        whose probability fell below ``e**-2``, about 13.5%, of the old).

    The mean k3 is dominated by its tail: one token pushed from p=0.99 to 1e-5
    among 15k adds 7 to it. ``collapsed_frac`` and ``log_ratio_min`` say
    whether a large ``approx_kl`` is a few collapsed tokens (each a decision
    the policy made with confidence and now rarely makes: in generated code,
    often a syntax token) or a broad move of the whole distribution.
    """
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    is_weight = None
    if rollout_logp is not None and is_cap is not None:
        is_weight = torch.exp((old_logp - rollout_logp).clamp(-20.0, 20.0)).clamp(max=is_cap).detach()
        per_token = per_token * is_weight
    loss = aggregate(per_token, mask, aggregation)
    with torch.no_grad():
        m = mask
        metrics = {
            "clip_frac": float(masked_mean((clipped > unclipped).float(), m)),
            "approx_kl": float(masked_mean(torch.exp(-log_ratio) - 1 + log_ratio, m)),
            "ratio_mean": float(masked_mean(ratio, m)),
            "is_weight_mean": float(masked_mean(is_weight, m)) if is_weight is not None else 1.0,
            "log_ratio_min": float(log_ratio.masked_fill(m <= 0, 0.0).min()),
            "collapsed_frac": float(masked_mean((log_ratio < COLLAPSED_LOG_RATIO).float(), m)),
        }
    return loss, metrics


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    *,
    clip: float | None = 0.2,
    aggregation: str = "token_mean",
) -> tuple[Tensor, dict[str, float]]:
    """``0.5 * max((V - R)^2, (clip(V, V_old ± clip) - R)^2)`` aggregated over the mask.

    ``clip=None`` gives the plain squared error. Metrics: ``vf_clip_frac``.
    """
    err = (values - returns) ** 2
    if clip is not None:
        v_clipped = old_values + (values - old_values).clamp(-clip, clip)
        err_clipped = (v_clipped - returns) ** 2
        per_token = 0.5 * torch.maximum(err, err_clipped)
        frac = float(masked_mean((err_clipped > err).float(), mask))
    else:
        per_token = 0.5 * err
        frac = 0.0
    return aggregate(per_token, mask, aggregation), {"vf_clip_frac": frac}


@torch.no_grad()
def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """``1 - Var(R - V) / Var(R)`` over policy tokens (1 = perfect, 0 = no better than the mean).

    Returns ``nan`` when the returns have zero variance.
    """
    var_r = masked_var(returns.float(), mask)
    if float(var_r) <= 0.0:
        return float("nan")
    return float(1.0 - masked_var((returns - values).float(), mask) / var_r)
