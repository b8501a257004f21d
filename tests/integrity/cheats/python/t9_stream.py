# expect: T9.python.stream
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, a, b=None):
        with torch.cuda.stream(self.side):
            out = cuda_extension.gemm(a, b)
        return out
