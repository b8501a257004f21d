# expect: T1.python.operator
# A tensor handed to a helper parameter annotated `int`: the helper computes with it as a number.
import torch
import torch.nn as nn

import cuda_extension as ext


def _scaled(n: int, k: int) -> int:
    return n * k + 1


class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.relu_forward(x)
        return _scaled(y, 2)
