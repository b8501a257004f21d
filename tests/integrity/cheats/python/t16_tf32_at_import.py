# expect: T16.python.global_flag
import torch
import torch.nn as nn

import cuda_extension


torch.backends.cuda.matmul.allow_tf32 = True


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.gemm(a, b)
