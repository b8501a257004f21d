import torch
import torch.nn as nn

import cuda_extension


class _Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return cuda_extension.swish_forward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s + x * s * (1 - s))


class ModelNew(nn.Module):
    def forward(self, x):
        return _Swish.apply(x)
