"""Each execution filter drops a task built to violate it and keeps one that does not.

Tasks run for real in a probe worker process (torch on CPU); the registered
plugins are built through the plugin manager, as the pipeline does.
"""

from __future__ import annotations

import pytest

from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.synthesis.execution_probe import ProbeSettings, ProbeWorker

pytestmark = pytest.mark.slow  # starts a torch worker process

HEADER = "import torch\nimport torch.nn as nn\n\n"
TAIL = "\n\ndef get_inputs():\n    return [torch.randn(8, 32)]\n\n\ndef get_init_inputs():\n    return []\n"


def task_module(forward: str, init: str = "", tail: str = TAIL) -> str:
    """A KernelBench-format module whose forward body is ``forward``."""
    body = "\n".join("        " + line for line in forward.strip().splitlines())
    init_body = "\n".join("        " + line for line in init.strip().splitlines()) if init else ""
    return (HEADER + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + (init_body + "\n" if init_body else "") + "\n    def forward(self, x):\n" + body + "\n" + tail)


GOOD = task_module("return torch.tanh(x) * 2.0 + x")


@pytest.fixture(scope="module")
def registry():
    return PluginManager(load_entrypoints=False).registry


_REPORTS: dict[tuple[int, str], object] = {}


def judge(registry, worker: ProbeWorker, name: str, code: str, config: dict | None = None, stochastic: bool = False):
    key = (id(worker), code)
    if key not in _REPORTS:  # one real run per (worker, task); each filter judges the same report
        _REPORTS[key] = worker.probe("t", code)
    report = _REPORTS[key]
    task = TaskManifest.from_code("synth/t", code, stochastic=stochastic, meta={"probe": report.model_dump()})
    return registry.build("task_filter", name, config).check(task, None)


def test_filters_are_registered_as_plugins(registry):
    assert {"runs", "deterministic", "informative", "runtime_window", "memory", "cpu_sizes"} <= set(registry.names("task_filter"))


def test_good_task_passes_every_filter(registry, probe_worker):
    for name in ("runs", "deterministic", "informative", "runtime_window", "memory"):
        verdict = judge(registry, probe_worker, name, GOOD, {"min_ms": 0.0, "max_ms": 1000.0} if name == "runtime_window" else None)
        assert verdict.keep, (name, verdict)


def test_runs_drops_eager_errors_crashes_and_hangs(registry, probe_worker):
    v = judge(registry, probe_worker, "runs", task_module("return x @ torch.ones(5, 5)"))
    assert not v.keep and v.reason == "runs" and "eager forward failed" in v.message
    v = judge(registry, probe_worker, "runs", task_module("import os\nos._exit(7)"))
    assert not v.keep and "crash" in v.message
    hang = ProbeWorker(probe_worker.settings.model_copy(update={"timeout_s": 3.0}))
    try:
        v = judge(registry, hang, "runs", task_module("while True:\n    x = x + 1"))
        assert not v.keep and "timeout" in v.message
        # the next task gets a fresh worker: one bad task never stops the run
        hang.settings = hang.settings.model_copy(update={"timeout_s": 120.0})
        assert judge(registry, hang, "runs", GOOD).keep
    finally:
        hang.close()


def test_deterministic_drops_dropout_by_source_and_by_observation(registry, probe_worker):
    dropout = task_module("return self.drop(x)", init="self.drop = nn.Dropout(p=0.5)")
    v = judge(registry, probe_worker, "deterministic", dropout)
    assert not v.keep and "Dropout" in v.message
    v = judge(registry, probe_worker, "deterministic", dropout, {"check_source": False})
    assert not v.keep and "differ" in v.message  # two real eager runs differ
    v = judge(registry, probe_worker, "deterministic", GOOD, stochastic=True)
    assert not v.keep and "declared stochastic" in v.message


def test_informative_drops_constant_nan_and_input_independent_outputs(registry, probe_worker):
    v = judge(registry, probe_worker, "informative", task_module("return x * 0.0 + 1.0"))
    assert not v.keep and "near-constant" in v.message
    v = judge(registry, probe_worker, "informative", task_module("return torch.log(-x.abs() - 1.0)"))
    assert not v.keep and "NaN" in v.message
    independent = task_module("return self.w.expand(x.shape[0], -1) + 0.0 * x.sum()",
                              init="self.w = nn.Parameter(torch.randn(1, 32))")
    v = judge(registry, probe_worker, "informative", independent)
    assert not v.keep and "indistinguishable" in v.message


def test_runtime_window_drops_tasks_outside_the_window(registry, probe_worker):
    slow = task_module("import time\ntime.sleep(0.03)\nreturn x + 1.0")
    window = {"min_ms": 0.0, "max_ms": 10.0}
    v = judge(registry, probe_worker, "runtime_window", slow, window)
    assert not v.keep and v.measurements["eager_ms"] > 10.0
    assert judge(registry, probe_worker, "runtime_window", GOOD, window).keep
    v = judge(registry, probe_worker, "runtime_window", GOOD, {"min_ms": 50.0, "max_ms": 100.0})
    assert not v.keep and "outside" in v.message


def test_memory_drops_tasks_over_the_limit_and_worker_cap(registry, probe_worker):
    big = task_module("y = torch.ones(64, 1024, 1024)\nreturn x + y.sum() * 0.0 + y[0, :8, :32].sum(0)")
    v = judge(registry, probe_worker, "memory", big, {"max_mb": 128})
    assert not v.keep and v.measurements["peak_mem_mb"] > 128
    assert judge(registry, probe_worker, "memory", GOOD, {"max_mb": 128}).keep
    capped = ProbeWorker(ProbeSettings(device="cpu", timeout_s=60, compile_backend=None, memory_cap_mb=1.0))
    try:
        capped.start()
        cap = capped._tree_rss_mb() + 300.0
        capped.settings = capped.settings.model_copy(update={"memory_cap_mb": cap})
        huge = task_module("y = torch.ones(256, 1024, 1024)\nimport time\ntime.sleep(5)\nreturn x + y.mean()")
        v = judge(registry, capped, "memory", huge)
        assert not v.keep and "memory cap" in v.message
    finally:
        capped.close()
