# expect: T1.python.torch_call
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a):
        act = lambda t, f=torch.relu: f(t)
        return act(cuda_extension.noop(a))
