"""Compiles and task probes run at background priority, behind the processes timing on a GPU."""

from __future__ import annotations

import os

import pytest

from cuda_agent.harness._build_sandbox import BACKGROUND_NICE, BACKGROUND_NICE_ENV, background_priority, run_sandboxed
from cuda_agent.harness.tasks import TaskProbeError, load_task_code

BASE = os.nice(0)  # the test process's own niceness (children add to it)


@pytest.mark.parametrize("isolation", ["process", "auto"])
def test_sandboxed_background_command_runs_niced(isolation, monkeypatch):
    monkeypatch.delenv(BACKGROUND_NICE_ENV, raising=False)
    run = run_sandboxed(["sh", "-c", "nice; sh -c nice"], timeout_s=30, isolation=isolation, background=True)
    assert run.returncode == 0, run.output
    expected = min(19, BASE + BACKGROUND_NICE)
    assert run.output.split() == [str(expected), str(expected)]  # and every process it starts inherits it
    plain = run_sandboxed(["sh", "-c", "nice"], timeout_s=30, isolation=isolation)
    assert plain.output.split() == [str(BASE)]


def test_background_level_follows_the_environment(monkeypatch):
    monkeypatch.setenv(BACKGROUND_NICE_ENV, "0")
    assert background_priority(["true"]) == ["true"]
    monkeypatch.setenv(BACKGROUND_NICE_ENV, "5")
    assert background_priority(["true"])[1:] == ["-n", "5", "true"]
    monkeypatch.setenv(BACKGROUND_NICE_ENV, "lots")
    with pytest.raises(ValueError, match="CUDA_AGENT_BACKGROUND_NICE='lots' is not an integer"):
        background_priority(["true"])


def test_task_probe_runs_niced(monkeypatch):
    monkeypatch.delenv(BACKGROUND_NICE_ENV, raising=False)
    code = (
        "import os, torch, torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    raise ValueError(f'niceness {os.nice(0)}')\ndef get_init_inputs():\n    return []\n"
    )
    with pytest.raises(TaskProbeError) as info:
        load_task_code(code, "t/nice", device="cpu", timeout_s=60)
    assert f"niceness {min(19, BASE + BACKGROUND_NICE)}" in str(info.value)
