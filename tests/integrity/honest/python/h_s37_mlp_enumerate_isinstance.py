# Honest (session 37's false-rejection hunt: refused before, graded correct since).
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        """
        :param input_size: The number of input features
        :param layer_sizes: A list of ints containing the sizes of each hidden layer
        :param output_size: The number of output features
        """
        super(ModelNew, self).__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        """Each Linear (with the ReLU that follows it fused in) runs as one custom kernel."""
        layers = list(self.network)
        for i, layer in enumerate(layers):
            if isinstance(layer, nn.Linear):
                fuse_relu = i + 1 < len(layers) and isinstance(layers[i + 1], nn.ReLU)
                x = cuda_extension.fused_linear(x, layer.weight, layer.bias, fuse_relu)
        return x
