"""A task's Model runs as KernelBench runs it (training mode: BatchNorm on the batch's statistics), dropout off,
on both sides of every comparison (harness/model_mode.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cuda_agent.harness.model_mode import set_task_mode

#: KernelBench level1/33_BatchNorm's form, small.
BATCHNORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.rand(8, 4, 16, 16)]

def get_init_inputs():
    return [4]
'''

#: KernelBench level2/66_Matmul_Dropout_Softmax's form (rate 0.2), small.
DROPOUT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        x = self.matmul(x)
        x = self.dropout(x)
        return torch.softmax(x, dim=1)

def get_inputs():
    return [torch.rand(16, 32)]

def get_init_inputs():
    return [32, 24, 0.2]
'''


def test_batchnorm_normalises_with_the_batch_statistics_and_dropout_is_the_identity() -> None:
    model = set_task_mode(torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Dropout(0.5)), torch)
    assert model.training and model[0].training and not model[1].training
    x = torch.rand(4, 3, 5, 5) * 3 + 2
    with torch.no_grad():
        y, again = model(x), model(x)
    assert torch.equal(y, again)  # no dropout mask
    # the batch's statistics: each channel comes out with mean 0 and variance 1 (eval mode would return ~x)
    assert y.mean(dim=(0, 2, 3)).abs().max() < 1e-5
    assert (y.var(dim=(0, 2, 3), unbiased=False) - 1).abs().max() < 1e-3
    assert set_task_mode(3, torch) == 3


@pytest.mark.slow
def test_the_self_check_of_batchnorm_and_dropout_tasks_is_correct_on_cpu(tmp_path: Path) -> None:
    """KernelBench's own Model graded against itself: with the reference in eval mode and the runner in training
    mode, every BatchNorm problem was 'incorrect' (33_BatchNorm in the CPU self-check of session 17), and a dropout
    rate above zero made the runner's outputs differ from call to call."""
    from cuda_agent.cli import main

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "batchnorm.py").write_text(BATCHNORM)
    (tasks / "dropout.py").write_text(DROPOUT)
    cfg = tmp_path / "check.yaml"
    cfg.write_text("plugins:\n  cpu:\n    harness:\n      verify: {input_sets: 2}\n"
                   f"      timing: {{preset: quick, compile_baseline: false, baseline_cache_dir: {tmp_path / 'bl'}}}\n")
    out = tmp_path / "check"
    rc = main(["tasks", "check", f"folder:{tasks}", "--backend", "cpu", "--out", str(out), "-c", str(cfg),
               "-o", "eval.progress=false"])
    report = json.loads((out / "report.json").read_text())
    assert rc == 0, [(r["task_id"], r["status"], r["reason"][:300]) for r in report["rows"]]
    assert report["summary"]["by_status"] == {"correct": 2}


def test_the_probe_child_sets_the_mode_without_importing_cuda_agent() -> None:
    """The probe child runs under ``python -I`` (PYTHONPATH ignored): where cuda_agent is installed with ``--target
    DIR`` plus PYTHONPATH (the GPU machine, air-gapped clusters) it cannot import the package. Its import of
    ``cuda_agent.harness.model_mode`` failed every task there as 'model_error' (session 18, on the H200)."""
    import subprocess
    import sys

    import cuda_agent.harness as harness

    child = Path(harness.__file__).with_name("_task_probe_child.py")
    blocked = ("import runpy, sys; sys.modules['cuda_agent'] = None; sys.argv = [sys.argv[1]]; "
               "runpy.run_path(sys.argv[0], run_name='__main__')")
    proc = subprocess.run([sys.executable, "-I", "-c", blocked, str(child)], capture_output=True, text=True,
                          input=json.dumps({"code": BATCHNORM, "device": "cpu", "seed": 0}), timeout=120)
    lines = proc.stdout.splitlines()
    assert lines[:1] == ["READY"], proc.stderr[-2000:]
    facts = json.loads(lines[1])
    assert facts["ok"], facts
    (out,) = facts["outputs"]
    assert out["min"] < -1.0  # normalised by the batch's statistics (eval mode would give about x, in [0, 1))


def test_no_code_path_of_the_probe_child_imports_cuda_agent() -> None:
    """The behavioural test above covers the one-shot probe; this covers every path (``--serve``, meta sizing):
    no import statement in the child names cuda_agent."""
    import ast

    import cuda_agent.harness as harness

    tree = ast.parse(Path(harness.__file__).with_name("_task_probe_child.py").read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names and not [m for m in names if m.split(".")[0] == "cuda_agent"], names
