# expect: T7.python.module_override
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)

    def load_state_dict(self, state, strict=True):
        return None
