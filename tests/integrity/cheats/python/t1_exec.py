# expect: T1.python.dynamic_code
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        ns = {}
        exec('out = a @ b', {'a': a, 'b': b}, ns)
        cuda_extension.noop(a)
        return ns['out']
