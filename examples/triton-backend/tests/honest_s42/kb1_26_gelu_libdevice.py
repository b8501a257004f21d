# Solves KernelBench level1/26_GELU_.py (exact erf GELU). GPU-only grading: Triton's interpreter has no libdevice.
# Idioms: `from triton.language.extra import libdevice` and libdevice.erf in the kernel, a module-level
# tl.constexpr constant (1/sqrt(2)), an autotune keyed on n over a module-level GELU_CONFIGS list, `assert x.is_cuda`, a flatten/reshape round trip.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice

INV_SQRT2 = tl.constexpr(0.7071067811865476)
GELU_CONFIGS = [
    triton.Config({"BLOCK": 1024}, num_warps=4),
    triton.Config({"BLOCK": 4096}, num_warps=8),
]


@triton.autotune(configs=GELU_CONFIGS, key=["n"])
@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + libdevice.erf(x * INV_SQRT2))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.is_cuda, "GELU kernel expects a CUDA tensor"
        flat = x.contiguous().flatten()
        out = torch.empty_like(flat)
        n = flat.numel()
        gelu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](flat, out, n)
        return out.reshape(x.shape)
