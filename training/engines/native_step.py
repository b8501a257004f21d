"""ZeRO stage 0 with bf16 master weights: DeepSpeed's native mode, without its one-rank reduction and per-tensor clip.

``engine.zero_stage: 0`` with ``engine.master_weights: bf16`` (and bf16 training) gives DeepSpeed a bf16 module
and a config without mixed precision (``bf16.enabled: false``): DeepSpeed then wraps nothing around the client
optimizer, which steps the module's own bf16 parameters, the arithmetic of a plain PyTorch step. (With
``bf16.enabled`` DeepSpeed's stage-0 optimizers keep fp32 masters: ``BF16_Optimizer``, or ``FP16_UnfusedOptimizer``
when gradients accumulate in bf16.) Two costs remain in DeepSpeed 0.19.8's native path, both loops over tensors,
which :func:`install` removes (``engine.fused_zero_step``):

1. **The gradient all-reduce at one rank.** After every backward ``allreduce_gradients`` ->
   ``buffered_allreduce_fallback`` flattens every gradient into one buffer (a copy), multiplies it by
   1 / world size, all-reduces it and copies it back into each ``.grad``: four passes over 3 GB for a 1.5B model,
   whose result at a data-parallel world size of 1 is the gradient itself (x * 1.0 == x; a sum over one rank).
   At one rank the engine's ``enable_backward_allreduce`` (the switch DeepSpeed's pipeline engine uses) is
   turned off; with more ranks nothing changes.
2. **The per-tensor gradient clip.** ``clip_fp32_gradients`` -> ``deepspeed.runtime.utils.clip_grad_norm_``
   makes an fp32 copy of every gradient for its norm and multiplies each gradient by the clip factor one tensor
   at a time. The replacement computes the same fp32 norms with one ``torch._foreach_norm(..., dtype=float32)``,
   combines them with DeepSpeed's operations (stack, square, sum, root, data-parallel average) and DeepSpeed's
   clip factor, and multiplies with one ``_foreach_mul_`` by that factor's fp32 value (DeepSpeed multiplies by a
   one-element fp32 tensor, which is not a 0-dim scalar: the product is formed in fp32, as ``_foreach_mul_``
   does with a Python float), skipping the multiply when the factor is exactly 1 (nothing clipped).
   With ``engine.overflow_check`` a step whose global norm is non-finite is skipped (every gradient dropped, so
   the optimizer leaves parameters and state untouched; ``skipped_steps`` counted, grad norm ``inf``), as the
   ZeRO optimizers do; DeepSpeed's native mode itself has no overflow check and applies such a step, as
   ``overflow_check: false`` does here too.

The engine's ``get_global_grad_norm`` returns the step's norm (DeepSpeed's native mode leaves it ``None``).
Tested against unpatched native engines in ``tests/training/test_engine.py``.
"""

from __future__ import annotations

import math
from typing import Any

import torch


def applies(engine: Any) -> bool:
    """Whether ``engine`` runs DeepSpeed's native mode: ZeRO stage 0, no fp16/bf16 wrapper, the client optimizer bare."""
    return (engine.zero_optimization_stage() == 0 and not engine.fp16_enabled() and not engine.bfloat16_enabled()
            and engine.optimizer is engine.basic_optimizer and engine.mpu is None and not engine.has_moe_layers)


def install(engine: Any, *, overflow_check: bool) -> bool:
    """Skip the one-rank all-reduce and fuse the clip of a native-mode engine; False (unchanged) where it does not apply."""
    if not applies(engine):
        return False
    if engine.dp_world_size == 1:
        engine.enable_backward_allreduce = False  # the reduction over one rank is the identity (module docstring)
    engine.clip_fp32_gradients = lambda: fused_clip(engine, overflow_check=overflow_check)
    return True


def fused_clip(engine: Any, *, overflow_check: bool) -> torch.Tensor:
    """DeepSpeed's ``clip_grad_norm_`` (2-norm, no model parallelism) with multi-tensor kernels; returns the norm."""
    from deepspeed import comm as dist
    from deepspeed.accelerator import get_accelerator
    from deepspeed.utils import groups

    params = [p for p in engine.module.parameters() if p.grad is not None]
    if not params:
        return torch.zeros(())
    grads = [p.grad.data for p in params]
    device = get_accelerator().current_device_name()
    total = _stacked_fp32_norms(grads).pow(2).sum().float().to(device).pow(1.0 / 2)
    pg = groups._get_data_parallel_group()
    scaled = total * 1.0 / float(dist.get_world_size(group=pg))
    dist.all_reduce(scaled, group=pg)
    total = scaled.to(params[0].device)
    max_norm = torch.tensor([float(engine.gradient_clipping())], device=total.device)
    clip_coef = torch.min(torch.tensor([1.0], device=total.device), max_norm / (total + 1e-6))
    norm = float(total)  # one host sync per step: decides skip / no-op below
    engine._global_grad_norm = norm
    if overflow_check and not math.isfinite(norm):
        for p in params:
            p.grad = None  # the optimizer skips parameters without a gradient: nothing moves
        engine.skipped_steps += 1
        engine._global_grad_norm = float("inf")
        return total
    factor = float(clip_coef)
    if factor != 1.0:
        by_kind: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for g in grads:
            by_kind.setdefault((g.device, g.dtype), []).append(g)
        for (dev, _dtype), tensors in by_kind.items():
            torch._foreach_mul_(tensors, _fp32_factor(clip_coef, factor, dev))
    return total


def _fp32_factor(clip_coef: torch.Tensor, factor: float, device: torch.device) -> Any:
    """The factor in the form that makes ``_foreach_mul_`` form DeepSpeed's product, fp32(g) x fp32 factor, rounded to
    the gradient's dtype. CUDA's multi-tensor kernel takes a Python scalar in fp32 (its opmath type); CPU's rounds a
    Python scalar to bf16 first but keeps a 0-dim fp32 tensor's value (measured: tests/training/test_engine.py)."""
    return factor if device.type == "cuda" else clip_coef.reshape(()).to(device)


def _stacked_fp32_norms(grads: list[torch.Tensor]) -> torch.Tensor:
    """Each gradient's fp32 2-norm, stacked in order (DeepSpeed: ``g.float().norm(2)`` per tensor)."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, g in enumerate(grads):
        groups.setdefault((g.device, g.dtype), []).append(i)
    if len(groups) == 1:
        return torch.stack(torch._foreach_norm(grads, 2, dtype=torch.float32))
    first = grads[0].device
    norms: list[Any] = [None] * len(grads)
    for idx in groups.values():
        for i, n in zip(idx, torch._foreach_norm([grads[i] for i in idx], 2, dtype=torch.float32)):
            norms[i] = n.to(first)
    return torch.stack(norms)
