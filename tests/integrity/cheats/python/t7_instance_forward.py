# expect: T7.python.module_override
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.forward = lambda a: torch.relu(a)

    def forward(self, a):
        return cuda_extension.noop(a)
