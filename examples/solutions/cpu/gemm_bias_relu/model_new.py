"""relu(x @ W^T + b) with one fused kernel; the nn.Linear only holds the parameters."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, dtype=x.dtype, device=x.device)
        cuda_extension.gemm_bias_relu_forward(x, self.linear.weight, self.linear.bias, out)
        return out
