"""A cheaper ZeRO-1/2 optimizer step: DeepSpeed's arithmetic without its per-tensor loops (``engine.fused_zero_step``).

What DeepSpeed 0.19.8's ``DeepSpeedZeroOptimizer.step`` runs per step on the bf16 path (no offload), for a model
of N parameter tensors (N = 338 for Qwen2-1.5B, 339 in the critic):

1. ``check_overflow`` (``bf16.check_grad_overflow``, our ``engine.overflow_check``): ``has_inf_or_nan`` on every
   gradient tensor (amax, amin, two isfinite, logical and/not, an add into a counter: ~15 kernels per tensor),
   then an all-reduce and a host sync.
2. ``scaled_global_norm`` -> ``get_grad_norm_direct``: per tensor an fp64 copy of the gradient and a
   ``vector_norm``; then stack, square, sum, root (fp64 -> fp32), NaN/inf masked to -1, and a host sync in
   ``is_invalid_grad_norm``.
3. The gradient partition flattened (one cat), cast to the master dtype, ``unscale_and_clip_grads`` (one
   multiply), the client optimizer's step on the one flat tensor, the bf16 partition copied back from the
   masters, the all-gather (nothing on one rank).
4. ``_update_model_bit16_weights``: every parameter's ``.data`` re-pointed to its slice of the flat bf16 buffer,
   which it already is (DeepSpeed: "TODO: we probably don't need this? just to be safe").

Steps 1, 2 and 4 are loops over tensors: about 5,200 kernel launches per step on the H200 and ~19,000 aten ops on
CPU, where the device work they stand for is a few ms. :class:`FusedStepZeroOptimizer` keeps 3 as it is (but for
the multiply) and replaces the loops:

- **Overflow through the norm.** DeepSpeed's ``step`` already marks a step as overflowed when the global norm is
  non-finite (``is_invalid_grad_norm``, applied under ``check_grad_overflow``). The norm is accumulated in fp64
  over the same gradients the scan reads; squares of finite bf16/fp32 values (< 3.4e38) cannot overflow fp64, so
  the norm is non-finite exactly when some gradient element is inf or NaN. The separate scan is skipped; the
  skip behaviour (parameters and optimizer state untouched, ``skipped_steps`` counted, grad norm ``inf``) is the
  same. Only where the norm is fp64 (``get_norm_dtype``), computed, and not offloaded.
- **One fused norm.** The per-tensor fp64 norms come from one ``torch._foreach_norm(..., dtype=float64)``
  (a multi-tensor kernel on CUDA; a C++ loop on CPU) over the same tensors DeepSpeed selects; the combination
  (stack, square, sum, fp32, root, sentinel) is DeepSpeed's code. Only the summation order inside each tensor's
  fp64 norm may differ, far below the fp32 rounding of the result.
- **One vectorised clip multiply.** ``unscale_and_clip_grads`` computes DeepSpeed's clip factor with its own
  operations, skips the multiply when the factor is exactly 1 (nothing clipped: ``x * 1 == x``), and otherwise
  multiplies with ``_foreach_mul_`` where that gives DeepSpeed's products (fp32 partitions; bf16 ones on CUDA), see
  the comment there; DeepSpeed's ``mul_`` with a 0-dim device tensor runs a generic kernel (5.8 ms for the 1.5B
  bf16 partition on the H200, against 2 ms for the plain step's ``_foreach_mul_``).
- **Re-pointing only when needed.** ``_update_model_bit16_weights`` runs in full only when a parameter no longer
  points where the last full run left it (or the flat buffer moved: offload/reload, checkpoint load).

Installed by :func:`install` on the optimizer ``deepspeed.initialize`` built (its class is swapped for this
subclass: no state is copied, nothing else changes); refused (the optimizer is left as it is) where the
conditions above do not hold. Tested against unpatched engines in ``tests/training/test_engine.py``.
"""

from __future__ import annotations

from typing import Any

import torch


def _zero_optimizer_class() -> type:
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer

    return DeepSpeedZeroOptimizer


def _fused_class() -> type:
    global _FUSED
    if _FUSED is None:
        _FUSED = _make_fused_class(_zero_optimizer_class())
    return _FUSED


_FUSED: type | None = None


def by_device_and_dtype(tensors: list[torch.Tensor]) -> dict[tuple[torch.device, torch.dtype], list[torch.Tensor]]:
    """``tensors`` grouped by (device, dtype), each group in order: what one multi-tensor kernel can take."""
    out: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for t in tensors:
        out.setdefault((t.device, t.dtype), []).append(t)
    return out


def stacked_norms(tensors: list[torch.Tensor], norm_dtype: torch.dtype, device: Any) -> torch.Tensor:
    """The tensors' 2-norms in ``norm_dtype``, stacked in order on ``device``: one ``_foreach_norm`` per dtype and
    device (DeepSpeed: one norm of an up-cast copy per tensor, then ``stack``); an empty tensor's norm is 0."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, t in enumerate(tensors):
        if t.numel() > 0:
            groups.setdefault((t.device, t.dtype), []).append(i)
    if len(groups) == 1 and len(next(iter(groups.values()))) == len(tensors):  # the usual case: one group
        return torch.stack(torch._foreach_norm(tensors, 2, dtype=norm_dtype)).to(device)
    norms: list[Any] = [torch.zeros((), dtype=norm_dtype, device=device)] * len(tensors)  # empty: norm 0
    for idx in groups.values():
        for i, n in zip(idx, torch._foreach_norm([tensors[i] for i in idx], 2, dtype=norm_dtype)):
            norms[i] = n.to(device)
    return torch.stack(norms)


def _make_fused_class(base: type) -> type:
    from deepspeed import comm as dist
    from deepspeed.accelerator import get_accelerator
    from deepspeed.runtime.constants import PIPE_REPLICATED
    from deepspeed.runtime.utils import (inf, is_invalid_grad_norm, is_model_parallel_parameter,
                                         mask_nan_or_inf_with_val_inplace)
    from deepspeed.runtime.zero.utils import get_norm_dtype

    class FusedStepZeroOptimizer(base):  # type: ignore[misc, valid-type]
        """DeepSpeed's ZeRO-1/2 optimizer with the per-tensor loops of ``step`` fused (see the module docstring)."""

        def _norm_detects_overflow(self) -> bool:
            """Whether ``step`` will mark a non-finite gradient as overflow through the fp64 global norm."""
            return (self.compute_grad_norm and not self.cpu_offload and get_norm_dtype() == torch.float64
                    and (self.dtype != torch.bfloat16 or self.check_grad_overflow))

        def check_overflow(self, partition_gradients: bool = True) -> None:
            if self._norm_detects_overflow():
                # step() decides from the fp64 global norm, non-finite exactly when some gradient element is.
                self.overflow = False
                return
            super().check_overflow(partition_gradients)

        def get_grad_norm_direct(self, gradients: Any, params: Any, norm_type: float = 2) -> torch.Tensor:
            if float(norm_type) != 2.0:
                return super().get_grad_norm_direct(gradients, params, norm_type)
            # DeepSpeed's selection: padding skipped, pipeline-replicated skipped, model-parallel rule.
            chosen = []
            param_gradients = (g for g in gradients if not getattr(g, "_zero_padding", False))
            for g, p in zip(param_gradients, params):
                if hasattr(p, PIPE_REPLICATED) and p.ds_pipe_replicated:
                    continue
                if is_model_parallel_parameter(p) or (self.model_parallel_rank == 0):
                    chosen.append(g)  # gradients carry no autograd history: no detach needed
            norm_dtype = get_norm_dtype()
            if chosen:
                device = get_accelerator().current_device_name()
                total_norm = stacked_norms(chosen, norm_dtype, device).pow(2.0).sum().float()
            else:
                total_norm = torch.tensor(0.0, dtype=torch.float32).to(self.device)
            dist.all_reduce(total_norm, op=dist.ReduceOp.SUM, group=self.dp_process_group)
            self._model_parallel_all_reduce(tensor=total_norm, op=dist.ReduceOp.SUM)
            total_norm = total_norm.pow(1.0 / 2.0)
            mask_nan_or_inf_with_val_inplace(total_norm, device=self.device)
            return total_norm

        def unscale_and_clip_grads(self, grad_groups_flat: list[Any], total_norm: Any) -> None:
            if self.clip_grad == 0.0 and self.loss_scale == 1.0:
                return
            if self.clip_grad <= 0.0 or not torch.is_tensor(total_norm):
                return super().unscale_and_clip_grads(grad_groups_flat, total_norm)
            # DeepSpeed's combined scale, the same operations.
            clip_norm = total_norm
            if is_invalid_grad_norm(clip_norm):
                clip_norm = torch.tensor(float(inf), dtype=torch.float, device=self.device)
            clip = ((clip_norm / self.loss_scale) + 1e-6) / self.clip_grad
            clip = torch.clamp(clip, min=1.0)
            combined_scale = clip * self.loss_scale
            factor = 1. / combined_scale
            if float(factor) == 1.0:
                return  # x * 1 == x: no clipping this step (the norm check above already synchronised)
            grads = [g.data for grad in grad_groups_flat for g in (grad if isinstance(grad, list) else [grad])]
            for (device, dtype), tensors in by_device_and_dtype(grads).items():
                # DeepSpeed: g.mul_(factor), factor a 0-dim fp32 device tensor, which sends mul_ to a generic
                # (non-vectorised) kernel. _foreach_mul_ gives the same products in one vectorised kernel where its
                # factor has the dtype the elementwise kernel computes with: fp32 gradients (x * factor in fp32), and
                # bf16 gradients on CUDA, whose mul_ loads the fp32 factor as bf16 (BinaryFunctor<scalar_t, scalar_t>)
                # before multiplying in fp32. CPU's mul_ keeps the fp32 factor for bf16: DeepSpeed's own call there.
                if dtype == factor.dtype and device == factor.device:
                    torch._foreach_mul_(tensors, factor)
                elif device.type == "cuda" and device == factor.device:
                    torch._foreach_mul_(tensors, factor.to(dtype))
                else:
                    for g in tensors:
                        g.mul_(factor)

        def _update_model_bit16_weights(self, group_index: int) -> None:
            flat = self.bit16_groups_flat[group_index]
            params = self.bit16_groups[group_index]
            seen = getattr(self, "_bit16_pointers", {}).get(group_index)
            if (seen is not None and seen[0] == flat.data_ptr()
                    and all(p.data_ptr() == ptr for p, ptr in zip(params, seen[1]))):
                return  # every parameter still points at its slice of the flat buffer
            super()._update_model_bit16_weights(group_index)
            if not hasattr(self, "_bit16_pointers"):
                self._bit16_pointers = {}
            self._bit16_pointers[group_index] = (flat.data_ptr(), [p.data_ptr() for p in params])

    return FusedStepZeroOptimizer


def install(optimizer: Any) -> bool:
    """Swap a ZeRO-1/2 optimizer's class for :class:`FusedStepZeroOptimizer`; False (unchanged) where it does not apply.

    Applies to exactly ``DeepSpeedZeroOptimizer`` (not a subclass, not ZeRO-3, not the stage-0 bf16 optimizer),
    without CPU offload or ZenFlow, with an fp64 norm dtype.
    """
    from deepspeed.runtime.zero.utils import get_norm_dtype

    if type(optimizer) is not _zero_optimizer_class():
        return False
    if optimizer.cpu_offload or getattr(optimizer, "zenflow", False) or get_norm_dtype() != torch.float64:
        return False
    optimizer.__class__ = _fused_class()
    return True
