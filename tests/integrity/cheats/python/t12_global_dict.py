# expect: T12.python.cache_key
import torch
import torch.nn as nn

import cuda_extension


_CACHE = {}


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        key = a.data_ptr()
        if _CACHE.get(key) is None:
            _CACHE[key] = cuda_extension.noop(a)
        return _CACHE[key]
