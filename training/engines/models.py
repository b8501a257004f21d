"""Models for training: the causal LM (actor, reference) and the critic (actor backbone + scalar head).

A model source is either a folder saved with ``save_pretrained`` (or a hub
id already in the local cache) or a config dict with ``model_type`` (random
init, e.g. Qwen2-1.5B's shapes written out: nothing is downloaded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn


def load_causal_lm(source: str | Path | dict[str, Any], *, dtype: torch.dtype = torch.float32, seed: int = 0) -> nn.Module:
    """A ``transformers`` causal LM from a folder or a config dict (random init, seeded)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if isinstance(source, dict):
        cfg = dict(source)
        model_type = cfg.pop("model_type", None)
        if model_type is None:
            raise ValueError(f"model config dict needs 'model_type' (e.g. 'qwen2', 'llama'); got keys {sorted(cfg)}")
        config = AutoConfig.for_model(model_type, **cfg)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        return model
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"model folder {path} does not exist (give a save_pretrained folder or a config dict)")
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)


def backbone_of(lm: nn.Module) -> nn.Module:
    """The decoder stack of a causal LM (``lm.model`` for Llama/Qwen2), without the LM head."""
    base = getattr(lm, "base_model", None)
    if base is None or base is lm:
        raise TypeError(f"{type(lm).__name__} exposes no base_model; cannot build a critic from it")
    return base


class CriticModel(nn.Module):
    """Value model: the actor's backbone with a scalar head; ``forward`` gives ``[B, T]`` values.

    The head starts at zero so the first values are 0 (the baseline of a
    fresh critic) and its gradients do not disturb the backbone at step 1.
    """

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.config = lm.config
        self.backbone = backbone_of(lm)
        hidden = int(lm.config.hidden_size)
        self.value_head = nn.Linear(hidden, 1, dtype=next(lm.parameters()).dtype)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        """Recompute backbone activations in backward (delegates to transformers)."""
        self.backbone.gradient_checkpointing_enable(**kwargs)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Scalar value per position, float32, ``[B, T]``."""
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        hidden = out.last_hidden_state
        return self.value_head(hidden).squeeze(-1).float()


def enable_gradient_checkpointing(model: nn.Module, fraction: float = 1.0) -> int:
    """Recompute the activations of ``fraction`` of the decoder layers (spread evenly) in backward.

    Uses transformers' per-layer switch (``GradientCheckpointingLayer.gradient_checkpointing``), non-reentrant.
    Returns how many layers recompute. Layers left out keep their activations: less recomputation, more memory.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"checkpoint fraction must be in (0, 1], got {fraction}")
    from transformers.modeling_layers import GradientCheckpointingLayer

    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers:
        raise TypeError(f"{type(model).__name__} has no layers with a gradient-checkpointing switch")
    keep = round(fraction * len(layers))
    chosen = {int(i * len(layers) / keep) for i in range(keep)} if keep else set()
    for i, layer in enumerate(layers):
        layer.gradient_checkpointing = i in chosen
    return len(chosen)


def count_parameters(model: nn.Module) -> int:
    """Number of parameters (shared tensors counted once)."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total
