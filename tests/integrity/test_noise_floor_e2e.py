"""End to end (``cuda-agent score``, CPU backend): an honest kernel whose output is float32 rounding noise of the
reference (a mean of centred rows: exactly 0, the reference returns values near 1e-8) is graded correct through
the noise floor of ordinary sets (harness/noise_floor.py); without the floor only the reference itself passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrity.conftest import score_one
from tests.integrity.correctness_gaps import attacks as A

TASK = '''"""Mean of centred rows ([B, N] -> [B, 1]): exactly zero, float32 rounding noise in the reference."""

import torch
import torch.nn as nn

batch_size = 32
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=1, keepdim=True)).mean(dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''

# The row_sum example's kernel, computing the centred mean in float64 (rounded once: the exact answer, ~1e-17).
KERNEL = r"""
#include <cstdint>

void row_sum_cpu(const float* x, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    double m = 0.0;
    for (int64_t c = 0; c < cols; ++c) m += row[c];
    m /= static_cast<double>(cols);
    double s = 0.0;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(row[c]) - m;
    out[r] = static_cast<float>(s / static_cast<double>(cols));
  }
}
"""


@pytest.mark.slow
def test_float64_centred_mean_is_graded_correct_through_the_noise_floor(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "centred_mean.py").write_text(TASK)
    row = score_one(tmp_path, "centred_mean", A.workspace("row_sum", **{"row_sum.cpp": KERNEL}), tasks=str(tasks))
    # With K = 0 (no floor) the same grade read 'incorrect': 31 of 32 elements outside atol=2.49e-10 (RMS 2.49e-8).
    assert row["status"] == "correct", row
