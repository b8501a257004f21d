import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        # Indexing an nn.Sequential gives a submodule: its weights may be passed on, it may not be called.
        n = len(self.network)
        for i in range(0, n, 2):
            layer = self.network[i]
            x = cuda_extension.linear_act_forward(x, layer.weight, layer.bias, 1.0, 0.0 if i + 1 < n else 1.0)
        return x
