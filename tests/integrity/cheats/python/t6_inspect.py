# expect: T6.python.introspection
import inspect
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        cuda_extension.noop(a)
        return inspect.currentframe().f_back.f_locals['expected']
