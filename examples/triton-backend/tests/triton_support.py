"""Paths and honest solutions shared by triton-backend's tests."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
REPO = PACKAGE.parents[1]
TASKS = REPO / "examples" / "tasks"
EXAMPLE_TASKS = ["swish", "row_sum", "softmax", "gemm_bias_relu", "conv2d_relu"]


def honest(name: str) -> dict[str, str]:
    """The honest solution of example task ``name``: {'model_new.py': text}."""
    return {"model_new.py": (PACKAGE / "solutions" / name / "model_new.py").read_text()}
