# expect: T1.python.torch_call
import torch.nn.functional as F
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return F.gelu(cuda_extension.noop(a))
