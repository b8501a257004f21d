"""A task that does not fit the machine, then an honest one, in one ``score`` run (issue 21, item 2): the first is
``too_large`` (no reward, named figures), the second grades correct, the run goes on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: 160 GiB of inputs and as much output per set: no machine here fits one set.
HUGE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(40, 1024 ** 3)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_too_large_task_does_not_stop_the_next_one(tmp_path: Path, run_score) -> None:  # type: ignore[no-untyped-def]
    tasks = tmp_path / "tasks"
    solutions = tmp_path / "solutions"
    tasks.mkdir()
    solutions.mkdir()
    (tasks / "a_huge.py").write_text(HUGE)
    shutil.copy(ROOT / "examples" / "tasks" / "swish.py", tasks / "b_swish.py")
    shutil.copytree(ROOT / "examples" / "solutions" / "cpu" / "swish", solutions / "b_swish")
    shutil.copytree(ROOT / "examples" / "solutions" / "cpu" / "swish", solutions / "a_huge")
    report = run_score(solutions, tasks, tmp_path / "out")
    rows = {r["task"]: r for r in report["tasks"]}
    assert rows["a_huge"]["status"] == "too_large"
    assert "inputs 160.00 GiB" in rows["a_huge"]["message"] and "is available" in rows["a_huge"]["message"]
    assert rows["a_huge"]["reward"] == 0.0
    assert rows["b_swish"]["status"] == "correct", rows["b_swish"]["message"]
    assert report["summary"]["by_status"]["too_large"] == 1 and report["summary"]["by_status"]["error"] == 0
