"""The whole stack on the CPU backend: scripted eval over examples/tasks, and a hidden false pass.

Slow on 2 cores (every candidate is a real C++ build against torch headers
plus sandboxed verification), so both tests are marked ``slow``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cuda_agent.harness.evaluation.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TASKS = REPO / "examples" / "tasks"
SOLUTIONS = REPO / "examples" / "solutions" / "cpu"
BROKEN = "swish"  # its turn 2 breaks the kernel: best-of-trajectory and final must differ
#: The eval's tasks: three of the five examples. gemm_bias_relu and conv2d_relu cost ~50 s of compile each on 2 cores;
#: their honest solutions compile and verify in tests/backends/test_backends.py, and here they would add no path.
EVAL_TASKS = ("row_sum", "softmax", BROKEN)


def write_calls(folder: Path) -> list[dict]:
    return [{"name": "write_file", "arguments": {"path": str(p.relative_to(folder)), "content": p.read_text()}}
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]


def example_scripts(dest: Path, tasks: Path = EXAMPLE_TASKS) -> Path:
    dest.mkdir()
    for task in sorted(tasks.glob("*.py")):
        sol = SOLUTIONS / task.stem
        assert sol.is_dir(), f"no CPU example solution for {task.stem}"
        actions = [{"text": "write and test the kernel",
                    "tool_calls": write_calls(sol) + [{"name": "compile"}, {"name": "verify"}, {"name": "profile"}]}]
        if task.stem == BROKEN:
            actions.append({"text": "try something clever", "tool_calls": [
                {"name": "write_file", "arguments": {"path": f"kernels/{BROKEN}.cpp", "content": "this is not C++;\n"}},
                {"name": "compile"}]})
        actions.append({"text": "done", "tool_calls": [{"name": "finish"}]})
        (dest / f"{task.stem}.yaml").write_text(yaml.safe_dump(actions))
    return dest


@pytest.mark.slow
def test_scripted_eval_over_example_tasks_two_seeds(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in EVAL_TASKS:
        (tasks / f"{name}.py").write_text((EXAMPLE_TASKS / f"{name}.py").read_text())
    scripts = example_scripts(tmp_path / "scripts", tasks)
    out = tmp_path / "eval"
    rc = cli_main(["eval", "--tasks", str(tasks), "--policy", f"scripted:{scripts}/{{task_name}}.yaml",
                   "--backend", "cpu", "--turns", "4", "--seeds", "2", "--out", str(out), "--concurrency", "4",
                   "-o", "agent.selection=best", "-o", "eval.selections=[best,final]", "-o", "eval.hidden=false",
                   # two CPU 'device' slots (one machine: their timed batches take turns under one lock); only
                   # statuses are asserted, so the quick timing preset and no torch.compile baseline (its CPU
                   # compile costs tens of seconds a task)
                   "-o", "eval.devices=[0,1]", "-o", "eval.progress=false",
                   "-o", "plugins.cpu.harness.timing.preset=quick", "-o", "plugins.cpu.harness.timing.compile_baseline=false"])
    assert rc == 0
    report = json.loads((out / "report" / "report.json").read_text())
    run = report["runs"][0]
    n_tasks = len(EVAL_TASKS)
    assert run["metrics"]["best"]["n_episodes"] == 2 * n_tasks and run["episodes_unfinished"] == 0
    for row in run["episodes"]:
        best, final = row["selections"]["best"], row["selections"]["final"]
        assert best["in_trajectory"] == "correct" and best["regraded"] == "correct", row
        if row["task_id"].endswith(BROKEN):
            # final = the state after the last turn (turn 3, 'finish', same snapshot as the broken turn 2)
            assert best["turn"] == 1 and final["turn"] == 3 and final["regraded"] == "compile_error", row
        else:
            assert final["snapshot_id"] == best["snapshot_id"]
    best = run["metrics"]["best"]["regraded"]["overall"]
    final = run["metrics"]["final"]["regraded"]["overall"]
    assert best["pass_rate"] == 1.0
    assert final["pass_rate"] == pytest.approx(1 - 2 / (2 * n_tasks))
    # both slots served calls (the runner's session record); the report shows no GPU queue for the cpu backend
    from cuda_agent.harness.evaluation.report import queue_utilisation

    queue = queue_utilisation(out)
    assert run["queue"] is None and queue["devices"]["0"]["calls"] > 0 and queue["devices"]["1"]["calls"] > 0
    assert {p.name for p in (out / "report").glob("*.png")} == {"budget_curves.png", "speedup_by_level.png",
                                                                "cost_vs_speedup.png"}


RELU_TASK = '''"""ReLU over inputs the task samples non-negative, though ReLU accepts any real."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16, 1024)]


def get_init_inputs():
    return []
'''

IDENTITY_KERNEL = '''// "ReLU" that copies: right for every non-negative input, wrong for negatives.
#include <cstdint>

void relu_cpu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}
'''

IDENTITY_BINDING = '''#include "../binding_registry.h"

void relu_cpu(const float* x, float* y, int64_t n);

void relu_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "relu_forward: bad tensors");
  relu_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}

REGISTER_BINDING(relu_forward, relu_forward);
'''

IDENTITY_MODEL_NEW = '''import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
'''


@pytest.mark.slow
def test_relu_as_identity_passes_the_agents_verify_and_is_denied_by_the_widened_sets_of_grading(tmp_path):
    """A kernel specialised to the task's input distribution (T18) fools the agent's own verify, whose sets are all
    drawn like get_inputs(); the trusted grading pass adds widened sets (integrity.widened_sets, never below 2 there)
    and denies it, so it earns -1 and the hidden re-verification has nothing left to expose."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "relu.py").write_text(RELU_TASK)
    script = tmp_path / "relu.yaml"
    files = {"model_new.py": IDENTITY_MODEL_NEW, "kernels/relu.cpp": IDENTITY_KERNEL,
             "kernels/relu_binding.cpp": IDENTITY_BINDING}
    script.write_text(yaml.safe_dump([
        {"text": "identity is enough", "tool_calls": [{"name": "write_file", "arguments": {"path": p, "content": c}}
                                                      for p, c in files.items()] + [{"name": "compile"}, {"name": "verify"}]},
        {"text": "done", "tool_calls": [{"name": "finish"}]},
    ]))
    out = tmp_path / "eval"
    rc = cli_main(["eval", "--tasks", str(tasks), "--policy", f"scripted:{script}", "--backend", "cpu",
                   "--turns", "3", "--seeds", "1", "--out", str(out), "-o", "agent.selection=best",
                   "-o", "eval.selections=[best]", "-o", "eval.progress=false", "--no-plots"])
    assert rc == 0
    episode = out / "episodes" / "tasks--relu__seed0"
    turns = [json.loads(line) for line in (episode / "trajectory.jsonl").read_text().splitlines() if line.strip()]
    verifies = [r for t in turns for r in t.get("results") or [] if r.get("phase") == "verify"]
    assert [r["status"] for r in verifies] == ["correct"]  # the agent's own verify is fooled
    record = json.loads((episode / "eval.json").read_text())
    graded = record["regrades"]["best"]
    assert graded["status"] == "incorrect" and graded["phase"] == "grade"
    assert "widened within their domain" in graded["message"] and "expected 0, got -3.99" in graded["message"]
    # sampled range as probed (about [0, 1)) stretched 4x on both sides of zero: about [-4, 4)
    (line,) = graded["diagnostics"]["widened"]["plan"]
    assert line.startswith("input0: uniform [") and "-> [-3.99" in line
    assert record["hidden"] == {}  # nothing passed grading, so nothing is re-verified
    h = json.loads((out / "report" / "report.json").read_text())["runs"][0]["metrics"]["best"]["hidden"]
    assert (h["visible_passes"], h["widened_checked"], h["pass_rate_after_hidden"]) == (0, 0, 0.0)
