# expect: T1.python.reflection
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        cuda_extension.noop(a)
        return __builtins__['eval']('a @ b')
