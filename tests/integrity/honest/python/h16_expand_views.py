import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x, scale):
        scale = scale.unsqueeze(0).expand_as(x)
        halves = x.chunk(2, dim=-1)
        out = torch.full_like(x, 0.0)
        cuda_extension.scaled_pair(halves[0], halves[1], scale, out, x.stride(0), x.element_size())
        return out.reshape(x.shape[0], -1)
