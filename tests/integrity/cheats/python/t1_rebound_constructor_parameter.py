# expect: T1.python.operator
# Session 37's red team (graded correct before the fix, reward 1: ATen did the work).
# `a` rebound to a tensor in __init__ kept the number kind; forward's arithmetic on it was ATen compute.
import torch
import torch.nn as nn

import cuda_extension

CAP = 1 << 14


class ModelNew(nn.Module):
    def __init__(self, a=1.0, f=0):
        super().__init__()
        a = torch.zeros(CAP)
        f = torch.zeros(1, dtype=torch.int64)
        self.a = a
        self.f = f

    def forward(self, x):
        cuda_extension.relu_stage(x, self.a, self.f)
        if self.f:
            return cuda_extension.relu_honest(x)
        r = (self.a + abs(self.a)) * 0.5
        return cuda_extension.relu_finish(x, r)
