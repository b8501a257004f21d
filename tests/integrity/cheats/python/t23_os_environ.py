# expect: T23.python.process_access
import os
import torch
import torch.nn as nn

import cuda_extension


os.environ['NVIDIA_TF32_OVERRIDE'] = '1'


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)
