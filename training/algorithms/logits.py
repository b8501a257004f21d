"""Log-probs of the next tokens and entropies from logits, in sequence chunks.

At 16K tokens and a 150K vocabulary, fp32 logits alone take ~10 GB; working
in chunks keeps the softmax temporaries bounded.
"""

from __future__ import annotations

import torch
from torch import Tensor


def logprobs_and_entropy(
    logits: Tensor, targets: Tensor, *, with_entropy: bool = True, chunk: int = 4096, temperature: float = 1.0
) -> tuple[Tensor, Tensor | None]:
    """``(logp[B, T], entropy[B, T] | None)`` of ``targets`` under ``logits[B, T, V]``.

    ``logits[:, j]`` must be the prediction for ``targets[:, j]`` (already shifted).
    Computed in float32, ``chunk`` positions at a time.
    """
    B, T, _ = logits.shape
    logps, ents = [], []
    for s in range(0, T, chunk):
        lg = logits[:, s : s + chunk].float()
        if temperature != 1.0:
            lg = lg / temperature
        lsm = torch.log_softmax(lg, dim=-1)
        logps.append(lsm.gather(-1, targets[:, s : s + chunk].unsqueeze(-1)).squeeze(-1))
        if with_entropy:
            ents.append(-(lsm.exp() * lsm).sum(-1))
    logp = torch.cat(logps, dim=1) if logps else logits.new_zeros(B, 0, dtype=torch.float32)
    ent = (torch.cat(ents, dim=1) if ents else logits.new_zeros(B, 0, dtype=torch.float32)) if with_entropy else None
    return logp, ent
