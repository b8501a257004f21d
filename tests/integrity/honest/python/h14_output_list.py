import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, chunks):
        super().__init__()
        self.chunks = chunks

    def forward(self, x):
        outs = []
        step = x.shape[0] // self.chunks
        for i in range(self.chunks):
            part = x.narrow(0, i * step, step)
            outs.append(cuda_extension.scan(part))
        return tuple(outs)
