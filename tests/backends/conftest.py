"""Fixtures of the build/backend tests: one shared binding cache, task manifests, workspaces.

Compiling against torch headers costs 5-30 s per translation unit on the
CPU machines, so every test shares the real build cache (the prebuilt
binding object is keyed by backend, torch, Python and flags, so sharing is
safe) and session-scoped builds of the example solutions.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.build import default_cache_dir
from cuda_agent.harness.layout import write_layout
from cuda_agent.schemas.task import TaskManifest

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "examples" / "tasks"
SOLUTIONS = REPO / "examples" / "solutions"
EXAMPLE_TASKS = ["swish", "row_sum", "softmax", "gemm_bias_relu", "conv2d_relu"]


@pytest.fixture(scope="session")
def build_cache() -> Path:
    """The shared cache of prebuilt binding objects (the production default)."""
    return default_cache_dir()


def manifest(name: str) -> TaskManifest:
    """A code-only manifest of example task ``name`` (no probe: enough for building)."""
    return TaskManifest.from_code(f"examples/{name}", (TASKS / f"{name}.py").read_text())


def solution_workspace(root: Path, name: str, kind: str):
    """A fresh workspace at ``root`` holding the honest ``kind`` solution of task ``name``."""
    ws = write_layout(root, manifest(name), kind)  # type: ignore[arg-type]
    shutil.copytree(SOLUTIONS / kind / name, root, dirs_exist_ok=True)
    return ws
