"""GEMM + epilogue: ``relu(x @ W^T + b)`` (nn.Linear followed by ReLU), fp32.

H200-sized: 4096 x 4096 x 4096 (137 GFLOP; the fp32 contract forbids TF32).
``CPU_SIZES`` is the CPU backend's variant (see cuda_agent.harness.tasks).
"""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 4096

CPU_SIZES = {"batch_size": 64, "in_features": 256, "out_features": 128}


class Model(nn.Module):
    """Linear layer with a ReLU epilogue."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
