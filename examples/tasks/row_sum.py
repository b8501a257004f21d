"""Reduction: sum over the last dimension, keeping it (``[B, N] -> [B, 1]``).

Deliberately small: 32 MB read, eager well under 100 us on the H200, so it
exercises launch overhead and timing precision. ``CPU_SIZES`` is the CPU
backend's variant (see cuda_agent.harness.tasks).
"""

import torch
import torch.nn as nn

batch_size = 1024
dim = 8192

CPU_SIZES = {"batch_size": 32, "dim": 512}


class Model(nn.Module):
    """Row sums of a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
