# expect: T15.python.dtype_cast
# .float() is judged at run time; .half() stays refused statically.
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x.float().half())
