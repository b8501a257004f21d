# expect: T1.python.submodule_call
# The extension module handed to its own function: the C++ side gets a pybind11 module handle at call time
# (T1.cpp.module_handle refuses taking one; this is the Python half of the same route).
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = ext

    def forward(self, x):
        y = ext.relu_forward(x, ext)
        return self.ext.relu_forward(y, self.ext)
