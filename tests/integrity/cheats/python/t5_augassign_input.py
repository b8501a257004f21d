# expect: T5.python.input_mutation
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        out = cuda_extension.gemm(a, b)
        b += 1
        return out
