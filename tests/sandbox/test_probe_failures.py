"""Task probes that fail past the probe's own guards: every failure comes back as an answer, never as an exit
without a result, and an out-of-memory run is retried once holding the device's budget alone.

Real probe children (warm server and one-shot process) and real torch, on the CPU: the out-of-memory error is
raised by the task itself, as a CUDA allocator would raise it on a full GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness._probe_server import SERVER_ENV, close_servers
from cuda_agent.harness.memory_budget import budget_for
from cuda_agent.harness.tasks import TaskProbeError, run_probe

TAIL = "def get_init_inputs():\n    return []\n"

EXITS_IN_FORWARD = '''
import sys, torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        sys.exit(0)
def get_inputs():
    return [torch.randn(4)]
''' + TAIL

#: Inputs whose ``min`` raises: the failure comes after the forward, in the probe's description of the inputs.
ODD_INPUTS = '''
import torch, torch.nn as nn
class Odd(torch.Tensor):
    def min(self, *args, **kwargs):
        raise RuntimeError("ODD-MIN")
class Model(nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(4).as_subclass(Odd)]
''' + TAIL


def _oom_task(calls: Path, always: bool) -> str:
    """A task whose real (not meta-device) forward logs each call to ``calls`` and raises the CUDA allocator's
    error: on every call when ``always``, else on the first only."""
    return f'''
import torch, torch.nn as nn
CALLS = {str(calls)!r}
class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta":
            with open(CALLS, "a") as fh:
                fh.write("call\\n")
            if {always!r} or open(CALLS).read().count("call") == 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
        return x * 2
def get_inputs():
    return [torch.randn(8, 8)]
''' + TAIL


@pytest.fixture(params=["served", "one-shot"])
def probe_path(request, monkeypatch):
    """Both ways a probe runs: a child forked from a warm server, and a fresh one-shot process."""
    if request.param == "one-shot":
        monkeypatch.setenv(SERVER_ENV, "0")
    else:
        monkeypatch.delenv(SERVER_ENV, raising=False)
    close_servers()
    yield request.param
    close_servers()


def test_a_task_that_calls_sys_exit_fails_clearly_instead_of_dying_without_a_result(probe_path):
    with pytest.raises(TaskProbeError) as info:
        run_probe(EXITS_IN_FORWARD, device="cpu", timeout_s=60, source="exits")
    err = info.value
    assert err.kind == "forward_error"
    assert "the task called sys.exit(0) / raised SystemExit" in str(err)
    assert "without a result" not in str(err)


def test_an_exception_after_the_forward_is_reported_with_its_traceback(probe_path):
    with pytest.raises(TaskProbeError) as info:
        run_probe(ODD_INPUTS, device="cpu", timeout_s=60, source="odd")
    text = str(info.value)
    assert info.value.kind == "crash"
    assert "uncaught RuntimeError: ODD-MIN" in text
    assert "Traceback" in text and "_describe" in text  # where it escaped, not only that it did
    assert "without a result" not in text


def test_an_out_of_memory_error_is_retried_once_holding_the_device_alone(probe_path, tmp_path):
    calls = tmp_path / "calls"
    budget = budget_for("cpu", 0)
    before = budget.exclusive_holds
    facts = run_probe(_oom_task(calls, always=False), device="cpu", isolation="process", timeout_s=60,
                      source="flaky")
    assert facts["ok"] and facts["outputs"][0]["shape"] == [8, 8]
    assert budget.exclusive_holds == before + 1
    assert budget.peak_reserved == budget.capacity  # the retry held the whole budget
    assert budget.reserved == 0  # and gave it back
    assert calls.read_text().count("call") == 3  # the failed forward, then the retry's two


def test_a_task_that_runs_out_of_memory_alone_too_names_the_bytes_and_the_capacity(probe_path, tmp_path):
    calls = tmp_path / "calls"
    budget = budget_for("cpu", 0)
    before = budget.exclusive_holds
    with pytest.raises(TaskProbeError) as info:
        run_probe(_oom_task(calls, always=True), device="cpu", isolation="process", timeout_s=60, source="hungry")
    err, text = info.value, str(info.value)
    need = 8 * 8 * 4 * 3  # one input set and two forwards' outputs, no parameters
    assert err.kind == "out_of_memory"
    assert err.details == {"needed_bytes": need, "available_bytes": budget.capacity, "device": "cpu"}
    assert f"needs {need} bytes" in text and f"{budget.capacity} bytes" in text and "running alone" in text
    assert "Tried to allocate 7.00 GiB" in text  # the child's own error travels with it
    assert not text.startswith("bad task")  # the machine's memory, not the task file
    assert budget.exclusive_holds == before + 1  # one retry, no more
    assert calls.read_text().count("call") == 2


def test_an_out_of_memory_error_outside_the_forward_has_its_own_kind_too(tmp_path):
    """A MemoryError in get_inputs() under a fixed memory limit (no budget, so no retry)."""
    code = ("import torch, torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
            "def get_inputs():\n    if torch.get_default_device().type != 'meta':\n"
            "        raise MemoryError('no room')\n    return [torch.randn(4)]\n" + TAIL)
    with pytest.raises(TaskProbeError) as info:
        run_probe(code, device="cpu", isolation="process", timeout_s=60, memory_limit_bytes=2**40, source="inputs")
    assert info.value.kind == "out_of_memory"
    assert "get_inputs() ran out of memory (MemoryError)" in str(info.value)
