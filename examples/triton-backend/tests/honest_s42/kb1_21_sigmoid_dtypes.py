# Solves KernelBench level1/21_Sigmoid.py.
# Idioms: Triton dtypes as data: a module-level ACC_DTYPE = tl.float32 read by the kernel, a torch->tl dtype map
# whose entry is passed as a constexpr (OUT_DTYPE=...), a constexpr default taken from a module constant
# (BLOCK_SIZE: tl.constexpr = DEFAULT_BLOCK), kernel pointers annotated `torch.Tensor`, the grid written as a
# local `def grid(meta)`, x.view(-1).
import torch
import torch.nn as nn
import triton
import triton.language as tl

DEFAULT_BLOCK = 1024
ACC_DTYPE = tl.float32
TORCH_TO_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


@triton.jit
def sigmoid_kernel(x_ptr: torch.Tensor, y_ptr: torch.Tensor, n_elements: int, OUT_DTYPE: tl.constexpr,
                   BLOCK_SIZE: tl.constexpr = DEFAULT_BLOCK):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(ACC_DTYPE)
    y = 1.0 / (1.0 + tl.exp(-x))
    tl.store(y_ptr + offsets, y.to(OUT_DTYPE), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_flat = x.contiguous().view(-1)
        y = torch.empty_like(x_flat)
        n_elements = x_flat.numel()

        def grid(meta):
            return (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)

        sigmoid_kernel[grid](x_flat, y, n_elements, OUT_DTYPE=TORCH_TO_TL[x.dtype])
        return y.view(x.shape)
