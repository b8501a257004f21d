# expect: T15.python.dtype_cast
# .to(dtype=torch.float32) is judged at run time; any other dtype stays refused statically.
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x.to(dtype=torch.float16))
