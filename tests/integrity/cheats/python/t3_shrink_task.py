# expect: T3.python.import_task
import model
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        model.batch_size = 1

    def forward(self, a, b=None):
        return cuda_extension.noop(a)
