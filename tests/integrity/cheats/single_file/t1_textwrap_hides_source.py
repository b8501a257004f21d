# expect: T1.python.import_not_allowed
# textwrap used beyond dedent of a literal: the source the C++ rules would read is built at run time.
import textwrap

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_BODY = "auto out = at::{}(x, 1);\n  return out;"
cpp_source = textwrap.dedent(
    """
    #include <torch/extension.h>
    torch::Tensor softmax_forward(torch::Tensor x) {
    """
) + textwrap.indent(_BODY.format("softmax"), "  ") + "\n}\n"

ext = load_inline(name="sm", cpp_sources=cpp_source, functions=["softmax_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_forward(x)
