# expect: T10.python.thread
import threading
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        out = torch.empty_like(a)
        threading.Thread(target=cuda_extension.gemm_into, args=(a, b, out)).start()
        return out
