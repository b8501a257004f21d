"""ZeRO stage 0 with bf16 master weights: DeepSpeed's native mode, without its one-rank reduction and per-tensor clip.

``engine.zero_stage: 0`` with ``engine.master_weights: bf16`` (and bf16 training) gives DeepSpeed a bf16 module
and a config without mixed precision (``bf16.enabled: false``): DeepSpeed then wraps nothing around the client
optimizer, which steps the module's own bf16 parameters, the arithmetic of a plain PyTorch step. (With
``bf16.enabled`` DeepSpeed's stage-0 optimizers keep fp32 masters: ``BF16_Optimizer``, or ``FP16_UnfusedOptimizer``
when gradients accumulate in bf16.) Stage 0 in fp32 (the CPU default dtype) is native mode too. Two costs remain in DeepSpeed 0.19.8's native path, both loops over tensors,
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
   clip factor, and multiplies with one ``_foreach_mul_``. With torch's fused Adam/AdamW (the CUDA client
   optimizer) nothing waits for the device: the factor stays a device tensor (multiplied also when it is 1), and
   with ``engine.overflow_check`` a step whose global norm is non-finite is skipped on the device through the
   optimizer's ``found_inf`` (what ``torch.amp.GradScaler`` sets: parameters, Adam states and step counts stay
   as they were; grad norm ``inf``; ``skipped_steps`` counted from a pinned copy of the flag once the device has
   passed it, :func:`settle` waits for the rest), as the ZeRO optimizers skip such a step. Nothing here copies from the host either: DeepSpeed's ``torch.tensor([max_norm], device=...)`` and
   ``torch.tensor([1.0], device=...)`` copy from pageable memory, which waits for the queued gradient kernels
   like a sync. (The first version read the norm on the host to skip the multiply when nothing is clipped and
   kept those copies: 0.995-0.997 of the plain step on the H200, each optimizer step 1-5 ms slower than the plain
   step's, because while the host waits nothing is queued and the GPU then idles through the optimizer's Python
   preparing its kernels.)
   For bf16 gradients on CUDA the multi-tensor kernel takes the factor in bf16 (the product of DeepSpeed's ZeRO
   ``mul_`` and of torch's ``clip_grad_norm_``; DeepSpeed's native loop multiplies by the fp32 factor, so clipped
   bf16 gradients can differ from it in the last bit). With a non-fused optimizer (CPU's default) the norm is
   read on the host once per step: the step is skipped by dropping every gradient, the multiply by a factor of
   exactly 1 is skipped, and the products are DeepSpeed's bit for bit. DeepSpeed's native mode itself has no
   overflow check and applies a non-finite step, as ``overflow_check: false`` does here too.

The step is host-bound on the H200 (a 1.5B model: ~15 ms of host work for ~11.5 ms of kernels), so the
parameter list is made once at :func:`install` for the clip and for ``zero_grad`` (DeepSpeed walks the module
tree for each), and the world size is the engine's own attribute.

The engine's ``get_global_grad_norm`` returns the step's norm (DeepSpeed's native mode leaves it ``None``).
Tested against unpatched native engines in ``tests/training/test_engine.py``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from cuda_agent.training.engines.zero_step import by_device_and_dtype, stacked_norms


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
    # The step is host-bound on the H200 (1.5B model: ~15 ms of host work for ~11.5 ms of kernels), so the module's
    # parameters are listed once here instead of by a module-tree walk in the clip and again in zero_grad.
    params = list(engine.module.parameters())
    engine.clip_fp32_gradients = lambda: fused_clip(engine, overflow_check=overflow_check, params=params)
    engine.zero_grad = lambda: _drop_grads(params)
    if overflow_check and takes_found_inf(engine.optimizer):
        counter = SkipCounter(engine)
        engine.optimizer.register_step_post_hook(lambda opt, _args, _kwargs: counter.after_step(opt))
        engine.native_skip_counter = counter
    return True


def takes_found_inf(optimizer: Any) -> bool:
    """Whether ``optimizer`` is torch's fused Adam/AdamW, which skips a step on device when its ``found_inf`` is 1
    (the attribute ``torch.amp.GradScaler`` sets for fused optimizers)."""
    return isinstance(optimizer, torch.optim.Adam) and all(g.get("fused") for g in optimizer.param_groups)


def _drop_grads(params: list[torch.nn.Parameter]) -> None:
    """DeepSpeed's native ``zero_grad`` (every parameter's ``.grad`` set to None) over a list made once."""
    for p in params:
        p.grad = None


def fused_clip(engine: Any, *, overflow_check: bool, params: list[torch.nn.Parameter] | None = None) -> Any:
    """DeepSpeed's ``clip_grad_norm_`` (2-norm, no model parallelism) with multi-tensor kernels; returns the norm.

    With a fused optimizer nothing waits for the device: the factor is applied as a device tensor (also when it is
    1), and a non-finite step is skipped through the optimizer's ``found_inf``. Otherwise (CPU's foreach AdamW) the
    norm is read on the host, once per step, to skip the step or the multiply."""
    from deepspeed import comm as dist
    from deepspeed.accelerator import get_accelerator
    from deepspeed.utils import groups

    params = [p for p in (engine.module.parameters() if params is None else params) if p.grad is not None]
    if not params:
        return torch.zeros(())
    grads = [p.grad.data for p in params]
    device = get_accelerator().current_device_name()
    # DeepSpeed: g.float().norm(2) per gradient, stacked, squared, summed
    total = stacked_norms(grads, torch.float32, device).pow(2).sum().float().pow(1.0 / 2)
    world = engine.dp_world_size  # the data-parallel group's size (applies(): no MoE, no model parallelism)
    if world > 1:  # the data-parallel average of the norms; over one rank x * 1.0 / 1.0 == x
        total = total * 1.0 / float(world)
        dist.all_reduce(total, group=groups._get_data_parallel_group())
    total = total.to(params[0].device)
    # DeepSpeed builds max_norm and 1.0 with torch.tensor([...], device=...): a copy from pageable host memory,
    # which waits for every kernel queued before it. full_like / ones_like fill on the device: the same values.
    max_norm = torch.full((1,), float(engine.gradient_clipping()), dtype=total.dtype, device=total.device)
    clip_coef = torch.minimum(torch.ones_like(max_norm), max_norm / (total + 1e-6))
    if takes_found_inf(engine.optimizer):
        finite = torch.isfinite(total)
        engine._global_grad_norm = torch.where(finite, total, torch.full_like(total, math.inf))
        for (dev, dtype), tensors in by_device_and_dtype(grads).items():
            torch._foreach_mul_(tensors, _device_factor(clip_coef, dev, dtype))
        engine.optimizer.found_inf = (~finite).float().reshape(()) if overflow_check else None
        return total
    norm = float(total)  # one host sync per step: decides skip / no-op below
    engine._global_grad_norm = norm
    if overflow_check and not math.isfinite(norm):
        for p in params:
            p.grad = None  # the optimizer skips parameters without a gradient: nothing moves
        engine.skipped_steps += 1
        engine._global_grad_norm = math.inf
        return total
    factor = float(clip_coef)
    if factor != 1.0:
        for (dev, _dtype), tensors in by_device_and_dtype(grads).items():
            torch._foreach_mul_(tensors, factor if dev.type == "cuda" else clip_coef.reshape(()).to(dev))
    return total


class SkipCounter:
    """Adds the steps a fused optimizer skipped (``found_inf`` set) to ``engine.skipped_steps`` without waiting for
    the device: after each step the flag is copied to pinned host memory behind an event, and read once the event
    has passed (at a later step, or in :meth:`settle`). On CPU the flag is read at once. So ``skipped_steps`` can
    lag the device by the steps still in flight; :meth:`settle` (or :func:`settle`) brings it up to date."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.pending: list[tuple[Any, torch.Tensor]] = []

    def after_step(self, optimizer: Any) -> None:
        found = getattr(optimizer, "found_inf", None)
        if found is None:
            return
        if found.device.type != "cuda":
            self.engine.skipped_steps += int(bool(found))
            return
        host = torch.empty((), dtype=found.dtype, pin_memory=True)
        host.copy_(found, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self.pending.append((event, host))
        self.collect(wait=False)

    def collect(self, *, wait: bool) -> None:
        """Count every flag whose copy has finished (all of them with ``wait``)."""
        still = []
        for event, host in self.pending:
            if wait:
                event.synchronize()
            elif not event.query():
                still.append((event, host))
                continue
            self.engine.skipped_steps += int(bool(host))
        self.pending = still

    def settle(self) -> int:
        """Wait for the flags in flight; the exact ``skipped_steps``."""
        self.collect(wait=True)
        return int(self.engine.skipped_steps)


def settle(engine: Any) -> int:
    """``engine.skipped_steps`` with every step in flight counted (native-mode engines with a skip counter)."""
    counter = getattr(engine, "native_skip_counter", None)
    return counter.settle() if counter is not None else int(engine.skipped_steps)


def _device_factor(clip_coef: torch.Tensor, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The clip factor as the 0-dim tensor ``_foreach_mul_`` takes without a host sync. CUDA's multi-tensor kernel
    needs it in the gradients' dtype (otherwise it falls back to one ``mul_`` per tensor, which rounds it to that dtype
    anyway): for bf16 gradients the product is g x bf16(factor), DeepSpeed's ZeRO ``mul_`` and torch's
    ``clip_grad_norm_``, where DeepSpeed's native loop uses the fp32 factor. CPU keeps the fp32 factor's value."""
    factor = clip_coef.reshape(()).to(device)
    return factor.to(dtype) if device.type == "cuda" else factor
