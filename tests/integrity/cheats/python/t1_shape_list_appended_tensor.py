# expect: T1.python.operator
# list(x.shape) holds numbers only while nothing else is put in it.
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def forward(self, x):
        items = list(x.shape)
        items.append(x)
        y = items[-1] * 2
        return ext.relu_forward(y)
