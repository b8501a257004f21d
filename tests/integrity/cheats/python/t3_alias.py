# expect: T3.python.alias_reference
from model import Model
import torch
import torch.nn as nn

import cuda_extension


ModelNew = Model
