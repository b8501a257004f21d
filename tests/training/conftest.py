"""Fixtures of the training tests: tiny model configs and one torch thread (2-core CI machines)."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.training.toy_env import toy_model_config


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    # Tiny models on a shared 2-core machine: more threads only add contention.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def toy_config() -> dict:
    """Config dict of the toy tests' tiny Llama."""
    return toy_model_config()
