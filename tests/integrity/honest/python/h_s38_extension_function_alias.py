"""Honest: a module-level alias of an extension function (relu = ext.relu_forward; session 38)."""
import torch
import torch.nn as nn

import cuda_extension as ext

relu = ext.relu_forward


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x.contiguous())
