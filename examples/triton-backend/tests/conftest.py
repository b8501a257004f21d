"""Fixtures of triton-backend's tests: the backend (Triton's interpreter on a machine without a GPU), probed example
tasks, the honest solutions. Written the way a third-party author would, with cuda_agent.testing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("triton_backend")
sys.path.insert(0, str(Path(__file__).parent))  # the fixture tables (triton_cheats.py, triton_support.py), under importlib mode

from triton_support import TASKS  # noqa: E402


@pytest.fixture(scope="session")
def probed():
    """Example task name -> its probed manifest (inputs, outputs, sizes)."""
    from cuda_agent.harness.tasks import load_task_file

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = load_task_file(TASKS / f"{name}.py")
        return cache[name]

    return get


@pytest.fixture
def cpu_backend():
    """The triton backend on the CPU (interpreter), quick timing; closed after the test."""
    from triton_backend.adapter import TritonBackend, TritonConfig

    backend = TritonBackend(TritonConfig(device="cpu", harness={"timing": {"preset": "quick"}}))
    yield backend
    backend.close()
