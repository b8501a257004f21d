# expect: T9.python.stream
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        done = torch.cuda.Event()
        out = cuda_extension.gemm(a, b)
        done.record()
        return out
