"""Elementwise: Swish (SiLU), y = x * sigmoid(x).

KernelBench format. Module-level sizes are H200-sized (eager ~0.1 ms: 256 MB
read + 256 MB written); ``CPU_SIZES`` holds the CPU backend's small variant
(the harness applies it for backend 'cpu', see cuda_agent.harness.tasks).
"""

import torch
import torch.nn as nn

batch_size = 4096
dim = 16384

CPU_SIZES = {"batch_size": 16, "dim": 1024}


class Model(nn.Module):
    """Swish activation over a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
