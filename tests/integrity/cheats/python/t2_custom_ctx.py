# expect: T2.python.suppress_fallback
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.guard = None

    def forward(self, a, b=None):
        with self.guard:
            return cuda_extension.gemm(a, b)
