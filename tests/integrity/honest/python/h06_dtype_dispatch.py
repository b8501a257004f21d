import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float16:
            return cuda_extension.gelu_half(x)
        elif x.dtype in (torch.float32, torch.bfloat16):
            return cuda_extension.gelu_float(x)
        else:
            raise TypeError(f"unsupported dtype {x.dtype}")
