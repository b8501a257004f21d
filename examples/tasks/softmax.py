"""Softmax over the last dimension of a ``[B, N]`` tensor.

H200-sized: 256 MB in, 256 MB out (eager ~0.15 ms). ``CPU_SIZES`` is the
CPU backend's variant (see cuda_agent.harness.tasks).
"""

import torch
import torch.nn as nn

batch_size = 4096
dim = 16384

CPU_SIZES = {"batch_size": 16, "dim": 1000}


class Model(nn.Module):
    """Row-wise softmax."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
