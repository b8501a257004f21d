"""Honest: an autograd.Function's apply bound to a module-level name (softmax = SoftmaxFn.apply; session 38)."""
import torch
import torch.nn as nn

import cuda_extension as ext


class SoftmaxFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return ext.softmax_forward(x.contiguous())


softmax = SoftmaxFn.apply


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return softmax(x)
