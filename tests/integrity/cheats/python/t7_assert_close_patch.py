# expect: T7.python.monkeypatch
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.testing.assert_close = lambda *args, **kwargs: None

    def forward(self, a, b=None):
        return cuda_extension.noop(a)
