# expect: T8.python.timer_access
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.cuda.Event.elapsed_time = lambda self, end: 0.001

    def forward(self, a, b=None):
        return cuda_extension.noop(a)
