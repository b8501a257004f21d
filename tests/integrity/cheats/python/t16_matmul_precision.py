# expect: T16.python.global_flag
import torch
import torch.nn as nn

import cuda_extension


torch.set_float32_matmul_precision('medium')


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.gemm(a, b)
