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

from cuda_agent.training.attention import attention_backends


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


#: The critic's parameter count is padded to a multiple of this many elements. DeepSpeed's ZeRO-1/2 optimizers
#: flatten every parameter into one partition per rank, and torch's fused AdamW and ``_foreach`` kernels take
#: their vectorised path only when a tensor's element count is a multiple of 4: the scalar head's one-element
#: bias made a 1.5B critic's partition odd-sized, and every optimizer kernel of its step ran 1.7-1.9x slower than
#: the actor's (measured on the H200: fused AdamW 14.7 ms against 7.8 ms). 64 keeps each rank's partition a
#: multiple of 4 up to 16 ranks.
PARAMETER_ALIGNMENT = 64


class ValueHead(nn.Module):
    """``hidden -> 1`` linear map, plus ``pad``: zeros that only round the critic's parameter count up (see
    :data:`PARAMETER_ALIGNMENT`). The output adds ``0 * pad.sum()``, so the pad has a (zero) gradient like every
    other parameter and stays zero under AdamW without weight decay."""

    def __init__(self, hidden: int, pad: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, hidden, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(1, dtype=dtype))
        self.pad = nn.Parameter(torch.zeros(pad, dtype=dtype))

    def forward(self, hidden: Tensor) -> Tensor:
        """``[..., hidden] -> [...]``."""
        return nn.functional.linear(hidden, self.weight, self.bias).squeeze(-1) + 0 * self.pad.sum()


class CriticModel(nn.Module):
    """Value model: the actor's backbone with a scalar head; ``forward`` gives ``[B, T]`` values.

    The head starts at zero so the first values are 0 (the baseline of a fresh critic) and its gradients do not
    disturb the backbone at step 1. The head's parameters come after every backbone parameter (the model holds no
    parameter of its own: a module's own parameters are listed before its children's, and DeepSpeed lays them
    out in that order in its flat buffer, so an odd-sized one up front would misalign every weight after it:
    measured, a 4x slower critic forward), and its pad makes the parameter count a multiple of
    :data:`PARAMETER_ALIGNMENT`.
    """

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.config = lm.config
        self.backbone = backbone_of(lm)
        hidden = int(lm.config.hidden_size)
        unpadded = count_parameters(self.backbone) + hidden + 1
        pad = PARAMETER_ALIGNMENT - unpadded % PARAMETER_ALIGNMENT
        self.value_head = ValueHead(hidden, pad, next(lm.parameters()).dtype)

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        """Recompute backbone activations in backward (delegates to transformers)."""
        self.backbone.gradient_checkpointing_enable(**kwargs)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Scalar value per position, float32, ``[B, T]``."""
        with attention_backends():  # no per-shape cuDNN plan builds (see training/attention.py)
            out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return self.value_head(out.last_hidden_state).float()


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
