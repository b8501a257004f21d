# expect: T12.python.state_in_forward
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, a, b=None):
        if self.last is None:
            self.last = cuda_extension.gemm(a, b)
        return self.last
