# expect: T7.python.module_override
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)

    def __call__(self, *args):
        return self.forward(*args)
