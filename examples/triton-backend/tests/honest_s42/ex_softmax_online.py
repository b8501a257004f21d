# Solves the example task examples/tasks/softmax.py (softmax over the last dimension, n not a power of two).
# Idioms: an online (one-pass max/sum) softmax, tl.full with -inf, tl.math.exp / tl.math.log-free rescaling,
# tl.maximum, a @staticmethod launcher on ModelNew (called as self.launch), x.shape[-1] and x.reshape(-1, n), the grid as (rows,).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    m_i = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        # lanes that have only seen padding keep m = -inf; rescale with a finite max there
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.math.exp(m_i - m_safe) + tl.math.exp(x - m_safe)
        m_i = m_new
    m = tl.max(m_i, axis=0)
    denom = tl.sum(l_i * tl.math.exp(m_i - m), axis=0)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, tl.math.exp(x - m) / denom, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    @staticmethod
    def launch(x2d: torch.Tensor) -> torch.Tensor:
        rows, cols = x2d.shape
        y = torch.empty_like(x2d)
        online_softmax_kernel[(rows,)](x2d, y, cols, x2d.stride(0), y.stride(0), BLOCK=256)
        return y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        y = self.launch(x.reshape(-1, n).contiguous())
        return y.reshape(x.shape)
