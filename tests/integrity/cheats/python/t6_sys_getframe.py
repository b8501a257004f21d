# expect: T6.python.introspection
import sys
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        cuda_extension.noop(a)
        return sys._getframe(1).f_locals['ref_out']
