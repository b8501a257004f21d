import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def _launch(self, x, out):
        rows = x.numel() // x.shape[-1]
        cuda_extension.rms_norm(x, out, rows, x.shape[-1], self.eps)
        return out

    def forward(self, x):
        x = x.contiguous()
        return self._launch(x, torch.empty_like(x))
