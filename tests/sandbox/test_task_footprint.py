"""Task footprints: sized on the meta device before anything is allocated; a task too large fails fast."""

from __future__ import annotations

import pytest

from cuda_agent.harness.tasks import TaskProbeError, run_probe

#: KernelBench level1/19_ReLU's shape (4096 x 393216 fp32: 6 GiB in, 6 GiB out), as a task file would state it.
BIG_RELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''

SMALL_LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 2 * n)

    def forward(self, x):
        return self.fc(x)

def get_inputs():
    return [torch.randn(8, 64)]

def get_init_inputs():
    return [64]
'''


def test_a_task_larger_than_the_limit_is_refused_before_it_allocates() -> None:
    with pytest.raises(TaskProbeError) as info:
        run_probe(BIG_RELU, device="cpu", memory_limit_bytes=2**30, isolation="process", source="relu_big")
    err = info.value
    assert err.kind == "too_large"
    assert err.details["needed_bytes"] == 6 * 2**30 + 2 * 6 * 2**30
    assert err.details["available_bytes"] == 2**30
    assert "18.0 GiB" in str(err) and "1.0 GiB is available" in str(err)


def test_the_probe_reports_the_meta_footprint_beside_the_real_run() -> None:
    facts = run_probe(SMALL_LINEAR, device="cpu", isolation="process")
    fp = facts["footprint"]
    assert fp["method"] == "meta"
    assert fp["input_bytes"] == 8 * 64 * 4 == facts["inputs"][0]["nbytes"]
    assert fp["output_bytes"] == 8 * 128 * 4 == facts["outputs"][0]["nbytes"]
    assert fp["param_bytes"] == (64 * 128 + 128) * 4 == facts["param_bytes"]


def test_the_meta_run_does_not_change_what_the_real_run_draws() -> None:
    import types

    import torch

    facts = run_probe(SMALL_LINEAR, device="cpu", isolation="process", memory_limit_bytes=2**40)
    module = types.ModuleType("task")
    exec(SMALL_LINEAR, module.__dict__)
    torch.manual_seed(0)  # the probe's seed, with nothing run on the meta device in between
    model = module.Model(*module.get_init_inputs())
    x = module.get_inputs()[0]
    assert facts["inputs"][0]["min"] == float(x.min()) and facts["inputs"][0]["max"] == float(x.max())
    assert facts["outputs"][0]["max"] == pytest.approx(float(model(x).max()), rel=1e-6)


ITEM = SMALL_LINEAR.replace("return self.fc(x)", "return self.fc(x) * float(x.sum().item() > 0)")


def _probe_behind(blocker_bytes: int, code: str) -> dict:
    """Probe ``code`` while ``blocker_bytes`` of the CPU budget are held (forced: idle processes of earlier tests are
    asked to let go first, as the probe would ask them); assert the probe waits for memory until the blocker is
    released; return its facts."""
    import threading
    import time

    from cuda_agent.harness.memory_budget import budget_for

    budget = budget_for("cpu", 0)  # the budget probes on the CPU reserve in
    blocker = budget.hold(blocker_bytes, "someone else's session", force=True)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(run_probe(code, device="cpu", isolation="process")))
    try:
        thread.start()
        # Until the probe is waiting for memory: its meta-only request is answered first, by a child that imports
        # torch (tens of seconds on a loaded machine), so the wait is for the event, with a bound only against a hang.
        deadline = time.monotonic() + 900
        while not budget.waiting and thread.is_alive() and time.monotonic() < deadline:
            thread.join(timeout=0.1)
        assert budget.waiting == 1 and thread.is_alive() and not result
    finally:
        budget.release(blocker)
    thread.join(timeout=300)
    assert budget.waiting == 0
    return result


def test_a_probe_waits_for_its_footprint_in_the_devices_budget() -> None:
    """Probes started side by side each reserve their task's one-set footprint first (sized on the meta device):
    one that does not fit waits until memory is given back, instead of allocating beside the others."""
    from cuda_agent.harness.memory_budget import budget_for

    result = _probe_behind(budget_for("cpu", 0).capacity - 2**20, SMALL_LINEAR.replace("8, 64", "4096, 64"))
    assert result["ok"] and result["inputs"][0]["shape"] == [4096, 64]


def test_size_on_meta_sizes_a_6_gib_task_without_allocating_and_names_what_meta_cannot_run() -> None:
    """``size_on_meta`` (benchmarks/kb_footprints.py sizes every KernelBench problem with it, no GPU)."""
    from cuda_agent.harness.task_probe import size_on_meta

    fp = size_on_meta(BIG_RELU, source="relu_big")  # 12 GiB on this 24 GiB machine: only the meta run can do it here
    assert fp == {"method": "meta", "input_bytes": 6 * 2**30, "output_bytes": 6 * 2**30, "param_bytes": 0}
    fp = size_on_meta(ITEM, source="uses_item")
    assert fp["method"] == "unavailable" and "item()" in fp["reason"]


#: A model whose construction reads a value with ``.item()``, as KernelBench's level3/29_SwinMLP and
#: 30_SwinTransformerV2 do for their drop-path rates (``[x.item() for x in torch.linspace(...)]``).
INIT_ITEM = SMALL_LINEAR.replace("self.fc = nn.Linear(n, 2 * n)",
                                 "self.fc = nn.Linear(n, 2 * n)\n        self.rate = torch.linspace(0, 0.1, 3)[1].item()")


def test_a_model_whose_construction_cannot_run_on_meta_is_built_on_the_cpu_and_sized_on_meta() -> None:
    from cuda_agent.harness.task_probe import size_on_meta

    fp = size_on_meta(INIT_ITEM, source="init_item")
    assert fp == {"method": "meta", "input_bytes": 8 * 64 * 4, "output_bytes": 8 * 128 * 4,
                  "param_bytes": (64 * 128 + 128) * 4, "init": "cpu"}
    facts = run_probe(INIT_ITEM, device="cpu", isolation="process")  # the real run sees the same sizes
    assert facts["param_bytes"] == fp["param_bytes"] and facts["outputs"][0]["nbytes"] == fp["output_bytes"]


def test_the_meta_run_of_a_cpu_built_model_does_not_change_what_the_real_run_draws() -> None:
    import types

    import torch

    facts = run_probe(INIT_ITEM, device="cpu", isolation="process", memory_limit_bytes=2**40)
    module = types.ModuleType("task")
    exec(INIT_ITEM, module.__dict__)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    x = module.get_inputs()[0]
    assert facts["inputs"][0]["min"] == float(x.min()) and facts["inputs"][0]["max"] == float(x.max())
    assert facts["outputs"][0]["max"] == pytest.approx(float(model(x).max()), rel=1e-6)


def test_a_task_the_meta_device_cannot_size_probes_with_the_whole_budget_to_itself() -> None:
    """Its size is unknown until it runs, so its real run must not allocate beside others that took the same free
    bytes (a forward that calls ``.item()``): it waits for the whole budget and holds it."""
    result = _probe_behind(2**20, ITEM)  # any other reservation makes it wait
    assert result["ok"] and result["footprint"]["method"] == "unavailable"
