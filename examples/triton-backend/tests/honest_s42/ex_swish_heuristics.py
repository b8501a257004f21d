# Solves the example task examples/tasks/swish.py (y = x * sigmoid(x)).
# Idioms: @triton.heuristics deciding EVEN_N from args, a module-level tl.constexpr constant (LOG2E) read by the
# kernel, tl.exp2, .to(tl.float32) and back to the output's element type, a BLOCK_SIZE default on a constexpr
# parameter, the grid as a tuple, x.view(-1) / out.view_as(x).
import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
BLOCK = 2048


@triton.heuristics({"EVEN_N": lambda args: args["n_elements"] % args["BLOCK_SIZE"] == 0})
@triton.jit
def swish_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr = 1024, EVEN_N: tl.constexpr = False):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN_N:
        x = tl.load(x_ptr + offsets)
    else:
        x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0)
    xf = x.to(tl.float32)
    sig = 1.0 / (1.0 + tl.exp2(-xf * LOG2E))
    y = (xf * sig).to(out_ptr.dtype.element_ty)
    if EVEN_N:
        tl.store(out_ptr + offsets, y)
    else:
        tl.store(out_ptr + offsets, y, mask=offsets < n_elements)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_flat = x.contiguous().view(-1)
        out = torch.empty_like(x_flat)
        n = x_flat.numel()
        swish_kernel[(triton.cdiv(n, BLOCK),)](x_flat, out, n, BLOCK_SIZE=BLOCK)
        return out.view_as(x)
