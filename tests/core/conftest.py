"""Fixtures of the core tests: the toy backend plugin and a tiny task."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TOY_DIR = Path(__file__).parent / "toy_plugins"
if str(TOY_DIR) not in sys.path:
    sys.path.insert(0, str(TOY_DIR))

from cuda_agent.schemas.task import TaskManifest  # noqa: E402

TASK_CODE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
'''


@pytest.fixture()
def task() -> TaskManifest:
    """A small ReLU task manifest (not probed: the toy backend needs no shapes)."""
    return TaskManifest.from_code("tests/relu", TASK_CODE)


@pytest.fixture()
def toy_module():
    """The toy backend plugin module."""
    import toy_backend

    return toy_backend


@pytest.fixture()
def make_pm(toy_module):
    """Factory of plugin managers with the toy plugin and no entry points."""
    from cuda_agent.plugin_manager import PluginManager

    def make(disable=(), extra=()):
        return PluginManager(disable=disable, load_entrypoints=False, extra_plugins=[("toy", toy_module), *extra])

    return make
