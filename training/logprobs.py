"""Per-token log-probabilities of a causal LM: the one function the policy and the trainer share.

The ``hf`` policy's rollout log-probs and the trainer's recomputation come
from the same arithmetic (fp32 log-softmax of the logits), so in fp32 they
agree to float rounding (tests/policies check 1e-5).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from cuda_agent.training.attention import attention_backends


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counting only attended tokens (left padding gets position 0), shape [B, T]."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def selected_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log softmax(logits / temperature)[targets]`` in fp32; logits [..., V], targets [...]."""
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Log-prob of each next token: ``out[b, t] = log p(input_ids[b, t+1] | input_ids[b, :t+1])``.

    :param model: a transformers causal LM (or anything returning ``.logits`` [B, T, V]).
    :param input_ids: [B, T] token ids.
    :param attention_mask: [B, T], 1 on real tokens; with left padding the
        position ids are derived from it. Padded positions get meaningless
        values: mask them in the loss.
    :param temperature: divide the logits first (to match tempered sampling).
    :param chunk_size: compute the LM head over this many positions at a time
        (checkpointed when grad is enabled), so the [B, T, V] fp32 logits never
        exist at once: for long sequences and large vocabularies. Needs a model
        whose logits are ``output_embeddings(decoder(...))`` (Llama, Qwen2...).
    :returns: [B, T-1] fp32 tensor, differentiable when grad is enabled.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [B, T], got shape {tuple(input_ids.shape)}")
    if input_ids.shape[1] < 2:
        return torch.zeros(input_ids.shape[0], 0, dtype=torch.float32, device=input_ids.device)
    kwargs: dict[str, Any] = {}
    if attention_mask is not None:
        kwargs = {"attention_mask": attention_mask, "position_ids": position_ids_from_mask(attention_mask)}
    if chunk_size is None:
        with attention_backends():  # the kernels generation samples with (backward follows the forward's choice)
            logits = model(input_ids=input_ids, use_cache=False, **kwargs).logits
        return selected_logprobs(logits[:, :-1], input_ids[:, 1:], temperature)
    inner = getattr(model, "module", model)  # DeepSpeed / DDP wrappers
    decoder, head = inner.get_decoder(), inner.get_output_embeddings()
    if decoder is None or head is None:
        raise ValueError(f"chunk_size needs a model with get_decoder()/get_output_embeddings(); "
                         f"{type(inner).__name__} has none: call token_logprobs without chunk_size")
    with attention_backends():
        hidden = decoder(input_ids=input_ids, use_cache=False, **kwargs).last_hidden_state[:, :-1]
    targets = input_ids[:, 1:]
    parts = []
    for start in range(0, hidden.shape[1], chunk_size):
        h, t = hidden[:, start : start + chunk_size], targets[:, start : start + chunk_size]
        if torch.is_grad_enabled():
            parts.append(checkpoint(_head_logprobs, head, h, t, temperature, use_reentrant=False))
        else:
            parts.append(_head_logprobs(head, h, t, temperature))
    return torch.cat(parts, dim=1)


def _head_logprobs(head: Any, hidden: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    return selected_logprobs(head(hidden), targets, temperature)
