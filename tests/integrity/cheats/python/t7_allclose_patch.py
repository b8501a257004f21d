# expect: T7.python.monkeypatch
import torch
import torch.nn as nn

import cuda_extension


torch.allclose = lambda *args, **kwargs: True


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)
