# expect: T12.python.file_io
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        out = cuda_extension.noop(a)
        open('cache.bin', 'wb').write(b'')
        return out
