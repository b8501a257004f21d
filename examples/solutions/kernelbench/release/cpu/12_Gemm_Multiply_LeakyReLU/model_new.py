"""ModelNew for KernelBench 12_Gemm_Multiply_LeakyReLU: release convention, cpu backend."""
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        return ext.linear_act_forward(x, self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope)
