# expect: T8.python.timer_access
import time
import torch
import torch.nn as nn

import cuda_extension


time.perf_counter = lambda: 0.0


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)
