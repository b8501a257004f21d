"""Honest: a helper taking `linear: nn.Linear` and handing its weight and bias to the kernel (session 38)."""
import torch
import torch.nn as nn

import cuda_extension as ext


def fused_linear(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    return ext.linear_forward(x, linear.weight, linear.bias)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return fused_linear(x, self.fc)
