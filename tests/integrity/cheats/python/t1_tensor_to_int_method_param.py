# expect: T1.python.operator
# A tensor handed to a ModelNew method's parameter annotated int.
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def _scaled(self, n: int) -> int:
        return n * 2

    def forward(self, x):
        y = ext.relu_forward(x)
        return self._scaled(y)
