# Solves KernelBench level1/94_MSELoss.py (mean((p - t)^2), a 0-d output).
# Idioms: an autotuned block reduction with tl.atomic_add into an fp32 accumulator and reset_to_zero for it, a
# second tiny kernel dividing by n into the 0-d output, torch.zeros(1, ...) / torch.empty((), ...), grid lambda.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 1024}, num_warps=4), triton.Config({"BLOCK_SIZE": 2048}, num_warps=8)],
    key=["n_elements"],
    reset_to_zero=["acc_ptr"],
)
@triton.jit
def sq_diff_sum_kernel(p_ptr, t_ptr, acc_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0)
    d = p - t
    tl.atomic_add(acc_ptr, tl.sum(d * d, axis=0))


@triton.jit
def finalize_mean_kernel(acc_ptr, out_ptr, n_elements):
    total = tl.load(acc_ptr)
    tl.store(out_ptr, total / n_elements)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        p = predictions.contiguous()
        t = targets.contiguous()
        n = p.numel()
        acc = torch.zeros(1, device=p.device, dtype=torch.float32)
        out = torch.empty((), device=p.device, dtype=p.dtype)
        sq_diff_sum_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](p, t, acc, n)
        finalize_mean_kernel[(1,)](acc, out, n)
        return out
