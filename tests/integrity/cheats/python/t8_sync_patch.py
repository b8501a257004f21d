# expect: T8.python.timer_access
import torch
import torch.nn as nn

import cuda_extension


torch.cuda.synchronize = lambda *args: None


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)
