import torch
import torch.nn as nn

import cuda_extension

BLOCK = 256


class ModelNew(nn.Module):
    def forward(self, x):
        B, C, H, W = x.shape
        x = x.contiguous()
        n = B * C * H * W
        grid = (n + BLOCK - 1) // BLOCK
        flat = x.view(B, -1)
        out = torch.empty((B, C, H // 2, W // 2), device=x.device, dtype=x.dtype)
        cuda_extension.pool2x2(flat, out, B, C, H, W, grid, BLOCK)
        return out.permute(0, 1, 3, 2).transpose(2, 3)
