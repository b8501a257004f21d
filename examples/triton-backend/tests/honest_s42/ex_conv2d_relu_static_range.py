# Solves the example task examples/tasks/conv2d_relu.py (Conv2d k=3, padding=1, then ReLU).
# Idioms: a direct convolution with tl.static_range over the constexpr kernel window, a runtime loop over input
# channels, N, C, H, W = x.shape, the nn.Conv2d's weight/bias/padding read in forward, a 3-D grid, a fused ReLU.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv2d_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr,
                       C_in, H, W, C_out, H_out, W_out, PAD,
                       sxn, sxc, sxh, sxw, swo, swi, swh, sww, syn, syc, syh, syw,
                       KH: tl.constexpr, KW: tl.constexpr, BLOCK_HW: tl.constexpr):
    n = tl.program_id(0)
    co = tl.program_id(1)
    pid_hw = tl.program_id(2)
    hw = pid_hw * BLOCK_HW + tl.arange(0, BLOCK_HW)
    oh = hw // W_out
    ow = hw % W_out
    hw_mask = hw < H_out * W_out
    acc = tl.zeros((BLOCK_HW,), dtype=tl.float32)
    for ci in range(0, C_in):
        for kh in tl.static_range(KH):
            for kw in tl.static_range(KW):
                ih = oh + kh - PAD
                iw = ow + kw - PAD
                m = hw_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
                xv = tl.load(x_ptr + n * sxn + ci * sxc + ih * sxh + iw * sxw, mask=m, other=0.0)
                wv = tl.load(w_ptr + co * swo + ci * swi + kh * swh + kw * sww)
                acc += xv * wv
    acc += tl.load(b_ptr + co)
    acc = tl.maximum(acc, 0.0)
    tl.store(y_ptr + n * syn + co * syc + oh * syh + ow * syw, acc, mask=hw_mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, C, H, W = x.shape
        weight = self.conv.weight
        C_out, _, KH, KW = weight.shape
        pad = self.conv.padding[0]
        H_out = H + 2 * pad - KH + 1
        W_out = W + 2 * pad - KW + 1
        y = torch.empty((N, C_out, H_out, W_out), device=x.device, dtype=x.dtype)
        BLOCK_HW = min(1024, triton.next_power_of_2(H_out * W_out))
        grid = (N, C_out, triton.cdiv(H_out * W_out, BLOCK_HW))
        conv2d_relu_kernel[grid](x, weight, self.conv.bias, y, C, H, W, C_out, H_out, W_out, pad,
                                 *x.stride(), *weight.stride(), *y.stride(),
                                 KH=KH, KW=KW, BLOCK_HW=BLOCK_HW)
        return y
