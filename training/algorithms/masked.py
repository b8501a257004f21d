"""Statistics over the policy-token mask, and loss aggregation modes.

Every function takes ``mask`` with the same shape as the values (1 = policy
token). Positions with mask 0 never contribute, whatever their value (NaN
included: they are zeroed with ``torch.where``, not multiplied).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

#: How per-token losses become one scalar.
#: ``token_mean``: mean over all policy tokens of the batch (long responses weigh more);
#: ``seq_mean_token_mean``: mean per sequence, then mean over sequences;
#: ``seq_mean_token_sum``: sum per sequence, then mean over sequences.
Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"]
AGGREGATIONS: tuple[str, ...] = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum")


def _zeroed(values: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask.bool(), values, torch.zeros_like(values))


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of ``values`` where ``mask`` is 1 (over ``dim``, or everything)."""
    z = _zeroed(values, mask)
    return z.sum() if dim is None else z.sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``values`` over mask-1 positions; 0 where nothing is masked in."""
    count = mask.to(values.dtype).sum() if dim is None else mask.to(values.dtype).sum(dim=dim)
    return masked_sum(values, mask, dim) / count.clamp(min=1.0)


def masked_var(values: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance of ``values`` over mask-1 positions (Bessel-corrected by default)."""
    mean = masked_mean(values, mask)
    sq = masked_sum((values - mean) ** 2, mask)
    n = mask.to(values.dtype).sum()
    denom = (n - 1.0) if unbiased else n
    return sq / denom.clamp(min=1.0)


def masked_whiten(values: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise to unit variance (and zero mean) using mask-1 statistics only.

    Mask-0 positions come out as 0, so padding and observations carry no advantage.
    """
    mean = masked_mean(values, mask)
    var = masked_var(values, mask)
    out = (values - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return _zeroed(out, mask)


def masked_rescale(values: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """Divide by the root mean square over mask-1 positions: unit scale, nothing shifted.

    For advantages that are already measured against a baseline (the group baseline): a zero stays zero and every
    sign stays as the baseline made it. Whitening (:func:`masked_whiten`) would subtract the token-weighted mean,
    which is not zero when failing episodes are longer than passing ones, and hand every episode of a group that
    failed alike an advantage of ``-mean/std`` on each of its tokens.
    """
    return _zeroed(values * torch.rsqrt(masked_mean(values.square(), mask) + eps), mask)


def sequence_lengths(mask: Tensor) -> Tensor:
    """Number of policy tokens per sequence, ``[B]`` (the response-length statistic)."""
    return mask.to(torch.float32).sum(dim=-1)


def aggregate(loss: Tensor, mask: Tensor, mode: str = "token_mean") -> Tensor:
    """Reduce a per-token ``[B, T]`` loss to a scalar under ``mode`` (see :data:`Aggregation`).

    Sequences without any policy token are left out of the sequence means.
    """
    if mode == "token_mean":
        return masked_mean(loss, mask)
    per_seq_sum = masked_sum(loss, mask, dim=-1)
    n_tok = mask.to(loss.dtype).sum(dim=-1)
    present = (n_tok > 0).to(loss.dtype)
    if mode == "seq_mean_token_mean":
        per_seq = per_seq_sum / n_tok.clamp(min=1.0)
    elif mode == "seq_mean_token_sum":
        per_seq = per_seq_sum
    else:
        raise ValueError(f"unknown loss aggregation {mode!r}; valid: {', '.join(AGGREGATIONS)}")
    return (per_seq * present).sum() / present.sum().clamp(min=1.0)
