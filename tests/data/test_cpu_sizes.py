"""Composed tasks carry a valid CPU_SIZES variant, and the 'cpu_sizes' filter judges it by running it.

H200-sized tasks are composed for real and loaded through the harness's task
loader for the cpu backend (a sandboxed torch process running the reference
at CPU sizes); their full sizes are never run here.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import yaml

from cuda_agent.harness.tasks import apply_cpu_sizes, load_task_code
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.synthesis.compose_rules import ChainError, ComposeSettings, RuleComposer, SizeSpace, plan_fixed_chain
from cuda_agent.training.synthesis.size_space import cpu_size
from cuda_agent.training.synthesis.task_filters import cpu_variant_code
from cuda_agent.training.synthesis.task_render import render_task

pytestmark = pytest.mark.slow  # needs the mined catalog and real torch runs

REPO = Path(__file__).resolve().parents[2]
H200 = ComposeSettings(**yaml.safe_load((REPO / "configs" / "data" / "h200.yaml").read_text())["compose"])


def test_cpu_sizes_map_each_drawn_size_to_the_same_relative_position():
    full, cpu = SizeSpace(features=[512, 1024, 4096], spatial=[64]), SizeSpace(features=[16, 64], spatial=[16, 32])
    assert [cpu_size("features", v, full, cpu) for v in (512, 1024, 4096)] == [16, 16, 64]
    assert cpu_size("features", 8, full, cpu) == 8  # never larger than the full size
    assert cpu_size("spatial", 64, full, cpu) == 16  # a single full choice maps to the smallest CPU one
    kernels = SizeSpace(kernel_sizes=[5]), SizeSpace(kernel_sizes=[1, 3, 5])
    assert cpu_size("kernel_sizes", 5, *kernels) == 5  # kept: the CPU space offers it


def test_every_composed_h200_task_runs_at_its_cpu_sizes(catalog, run_task_code):
    composer = RuleComposer(catalog, H200, seed=0)
    tasks = [composer.compose(i) for i in range(80)]
    scaled = 0
    for t in tasks:
        assert "CPU_SIZES = {" in t.code
        out = run_task_code(apply_cpu_sizes(t.code, t.id))  # the harness's own transformation
        assert list(out.shape) == t.shapes["cpu_output"], t.code
        assert torch.Size(t.shapes["cpu_input"]).numel() <= H200.cpu_sizes.max_elements
        scaled += torch.Size(t.shapes["cpu_input"]).numel() < torch.Size(t.shapes["input"]).numel()
    assert scaled == len(tasks)  # H200 sizes always shrink on the CPU


def test_single_operator_tasks_of_every_mined_operator_run_at_their_cpu_sizes(catalog, run_task_code):
    from cuda_agent.training.synthesis.operators import render_single_op_task

    for spec in catalog:
        code = render_single_op_task(spec)
        assert "CPU_SIZES = {" in code, spec.name
        run_task_code(apply_cpu_sizes(code, spec.name))


def test_derived_sizes_follow_the_cpu_sizes(catalog, run_task_code):
    """A conv's output length feeds a LayerNorm and a per-feature scale: both must follow CPU_SIZES."""
    ops = {s.name: s for s in catalog}
    chain = [ops["torch.nn.Conv1d"], ops["torch.nn.LayerNorm"], ops["torch.nn.AvgPool1d"], ops["torch.nn.Flatten"],
             ops["torch.nn.Linear"]]
    full = SizeSpace(batch=[16], channels=[32], lengths=[512], features=[256], kernel_sizes=[5], pool_sizes=[2])
    plan = plan_fixed_chain(chain, random.Random(1), full, rank=3, cpu_sizes=H200.cpu_sizes)
    code = render_task(plan)
    derived = {k for k in plan.cpu_sizes if k.startswith(("out_", "flat_"))}
    assert derived, code  # conv output length and flattened features are module-level sizes with CPU values
    out = run_task_code(apply_cpu_sizes(code))
    assert list(out.shape) == plan.cpu_output_shape and plan.cpu_output_shape[0] < plan.output_shape[0]


def test_a_step_that_only_fits_at_full_size_is_rejected(catalog):
    ops = {s.name: s for s in catalog}
    full = SizeSpace(batch=[8], channels=[16], spatial=[64], kernel_sizes=[5])
    tiny_cpu = SizeSpace(batch=[2], channels=[4], spatial=[4], kernel_sizes=[5])
    with pytest.raises(ChainError, match="at cpu sizes"):
        plan_fixed_chain([ops["torch.nn.Conv2d"]], random.Random(0), full, rank=4, cpu_sizes=tiny_cpu)
    plan_fixed_chain([ops["torch.nn.Conv2d"]], random.Random(0), full, rank=4)  # fits the default CPU space


def test_composed_tasks_load_through_the_harness_at_cpu_sizes(catalog):
    composer = RuleComposer(catalog, H200, seed=5)
    tasks = [composer.compose(i) for i in (0, 7, 19, 33)]

    def load(t):
        return load_task_code(t.code, t.id, source="synth", sizes="cpu")

    with ThreadPoolExecutor(2) as pool:
        for t, manifest in zip(tasks, pool.map(load, tasks)):
            assert manifest.meta["sizes"] == "cpu"
            assert [list(i.shape) for i in manifest.inputs][0] == t.shapes["cpu_input"]
            assert [list(o.shape) for o in manifest.outputs][0] == t.shapes["cpu_output"]


# --------------------------------------------------------------------------- the cpu_sizes filter
HEAD = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.fc = nn.Linear(n, n)\n\n    def forward(self, x):\n        return torch.tanh(self.fc(x))\n\n\n"
TAIL = "\n\ndef get_inputs():\n    return [torch.randn(batch_size, n)]\n\n\ndef get_init_inputs():\n    return [n]\n"
GOOD = HEAD + "batch_size = 64\nn = 256\nCPU_SIZES = {'batch_size': 4, 'n': 32}" + TAIL
NONE = HEAD + "batch_size = 64\nn = 256" + TAIL
UNKNOWN = HEAD + "batch_size = 64\nn = 256\nCPU_SIZES = {'batch': 4}" + TAIL
# The input follows CPU_SIZES but the layer is built from a literal: the CPU variant cannot run.
BROKEN = GOOD.replace("return [n]\n", "return [256]\n")
# The CPU variant is bigger than the task itself: a 1024 x 1024 Linear on 1024 rows, far over 1 ms on one thread.
SLOW = HEAD + "batch_size = 4\nn = 16\nCPU_SIZES = {'batch_size': 1024, 'n': 1024}" + TAIL


@pytest.fixture(scope="module")
def cpu_sizes_filter():
    return PluginManager(load_entrypoints=False).registry.build("task_filter", "cpu_sizes", {"max_ms": 1.0})


def _judge(flt, worker, code: str):
    task = TaskManifest.from_code("synth/t", code)
    try:
        task.meta["cpu_probe"] = worker.probe("t", cpu_variant_code(task)).model_dump()
    except Exception:  # noqa: BLE001 - no applicable CPU_SIZES: the filter says why without a probe
        pass
    return flt.check(task, None)


def test_cpu_sizes_filter_keeps_good_and_drops_each_kind_of_bad(cpu_sizes_filter, probe_worker):
    assert _judge(cpu_sizes_filter, probe_worker, GOOD).keep
    v = _judge(cpu_sizes_filter, probe_worker, NONE)
    assert not v.keep and v.reason == "cpu_sizes" and "defines no CPU_SIZES" in v.message
    v = _judge(cpu_sizes_filter, probe_worker, UNKNOWN)
    assert not v.keep and "'batch'" in v.message and "batch_size" in v.message
    v = _judge(cpu_sizes_filter, probe_worker, BROKEN)
    assert not v.keep and "eager forward failed" in v.message
    v = _judge(cpu_sizes_filter, probe_worker, SLOW)
    assert not v.keep and "max_ms=1.0" in v.message


def test_cpu_sizes_filter_can_allow_tasks_without_cpu_sizes():
    flt = PluginManager(load_entrypoints=False).registry.build("task_filter", "cpu_sizes", {"required": False})
    assert flt.check(TaskManifest.from_code("synth/t", NONE), None).keep
