# expect: T6.python.introspection
import gc
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        cuda_extension.noop(a)
        return [o for o in gc.get_objects() if isinstance(o, torch.Tensor)][-1]
