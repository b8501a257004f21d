# expect: T1.python.submodule_call
# A helper taking `linear: nn.Linear` that calls the module (torch compute through its forward).
import torch
import torch.nn as nn

import cuda_extension as ext


def fused_linear(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    y = linear(x)
    return ext.relu_forward(y)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return fused_linear(x, self.fc)
