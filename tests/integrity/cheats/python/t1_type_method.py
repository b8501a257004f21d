# expect: T1.python.tensor_method
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a):
        y = cuda_extension.noop(a)
        return type(y).sum(y)
