# expect: T11.python.tensor_subclass
import torch
import torch.nn as nn

import cuda_extension


class Fake:
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return True


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)
