import torch
import torch.nn as nn

try:
    import cuda_extension
except ImportError as exc:
    raise RuntimeError("build the extension first") from exc


class ModelNew(nn.Module):
    def forward(self, x):
        if not x.is_contiguous():
            x = x.contiguous()
        return cuda_extension.square(x)
