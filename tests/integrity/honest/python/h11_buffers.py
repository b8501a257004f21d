import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.weight = nn.Parameter(torch.ones(num_features))

    def forward(self, x):
        out = torch.empty_like(x)
        ext.batch_norm_infer(x, self.running_mean, self.running_var, self.weight, out)
        return out
