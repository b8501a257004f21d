# expect: T1.python.dynamic_code
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        cuda_extension.noop(a)
        return eval('torch.matmul')(a, b)
