import torch
import torch.nn as nn

from cuda_extension import fused_forward


class ModelNew(nn.Module):
    def forward(self, x, y):
        with torch.cuda.device(x.device):
            stream = torch.cuda.current_stream().cuda_stream
            out = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
            fused_forward(x, y, out, stream)
        return out
