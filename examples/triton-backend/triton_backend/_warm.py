"""One small kernel of the loader's own, launched before the candidate exists (imported after the environment is
set, so ``@triton.jit`` sees the interpreter setting)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _cuda_agent_warm_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def launch(device: str) -> None:
    """Compile and run the warm-up kernel once on ``device`` and wait for it."""
    import torch

    x = torch.zeros(16, device=device)
    _cuda_agent_warm_kernel[(1,)](x, 16, BLOCK=16)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    if float(x.sum()) != 16.0:
        raise RuntimeError(f"Triton's warm-up kernel computed {x.tolist()} on {device}: Triton does not work here")
