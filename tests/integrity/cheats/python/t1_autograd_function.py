# expect: T1.python.torch_call
import torch
import torch.nn as nn

import cuda_extension


class _Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        cuda_extension.noop(a)
        return torch.mm(a, b)


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return _Fn.apply(a, b)
