"""Log-probs of the next tokens and entropies from logits, in sequence chunks.

At 16K tokens and a 150K vocabulary, fp32 logits alone take ~10 GB; working
in chunks keeps the softmax temporaries bounded. Under autograd each chunk is
checkpointed: only the (bf16) logits slice is kept for the backward pass and
the float32 log-softmax is recomputed there, instead of ~4 float32 copies of
every chunk staying alive until backward (~35 GB at 16K x 150K).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint


def _chunk_logp_entropy(lg: Tensor, tgt: Tensor, with_entropy: bool, temperature: float) -> tuple[Tensor, Tensor]:
    """(logp, entropy or an empty tensor) of one chunk, in float32."""
    lg = lg.float()
    if temperature != 1.0:
        lg = lg / temperature
    lsm = torch.log_softmax(lg, dim=-1)
    logp = lsm.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    ent = -(lsm.exp() * lsm).sum(-1) if with_entropy else logp.new_empty(0)
    return logp, ent


def logprobs_and_entropy(
    logits: Tensor, targets: Tensor, *, with_entropy: bool = True, chunk: int = 4096, temperature: float = 1.0,
    recompute: bool | None = None,
) -> tuple[Tensor, Tensor | None]:
    """``(logp[B, T], entropy[B, T] | None)`` of ``targets`` under ``logits[B, T, V]``.

    ``logits[:, j]`` must be the prediction for ``targets[:, j]`` (already shifted).
    Computed in float32, ``chunk`` positions at a time. ``recompute`` (default:
    whenever a gradient will flow to ``logits``) checkpoints each chunk; the values
    and gradients are the same either way.
    """
    B, T, _ = logits.shape
    if recompute is None:
        recompute = torch.is_grad_enabled() and logits.requires_grad
    logps, ents = [], []
    for s in range(0, T, chunk):
        args = (logits[:, s : s + chunk], targets[:, s : s + chunk], with_entropy, temperature)
        if recompute:
            lp, en = checkpoint(_chunk_logp_entropy, *args, use_reentrant=False)
        else:
            lp, en = _chunk_logp_entropy(*args)
        logps.append(lp)
        if with_entropy:
            ents.append(en)
    logp = torch.cat(logps, dim=1) if logps else logits.new_zeros(B, 0, dtype=torch.float32)
    ent = (torch.cat(ents, dim=1) if ents else logits.new_zeros(B, 0, dtype=torch.float32)) if with_entropy else None
    return logp, ent
