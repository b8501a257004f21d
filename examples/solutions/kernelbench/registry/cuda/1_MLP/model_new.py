"""ModelNew for KernelBench 1_MLP: registry convention, cuda backend."""
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        # network = [Linear, ReLU] * hidden layers + [Linear]: a fused linear+ReLU per hidden layer.
        n = len(self.network)
        for i in range(0, n, 2):
            layer = self.network[i]
            slope = 0.0 if i + 1 < n else 1.0
            x = ext.linear_act_forward(x, layer.weight, layer.bias, 1.0, slope)
        return x
