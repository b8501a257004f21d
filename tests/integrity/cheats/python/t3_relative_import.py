# expect: T3.python.import_task
from .model import Model
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.noop(a)
