"""``cuda-agent score`` on the CPU backend: report format, bad solutions never stop the others."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.score_cli import discover, render_markdown

REPO = Path(__file__).resolve().parents[2]


def test_discover_lists_folders_and_single_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b.py").write_text("")
    (tmp_path / "_hidden").mkdir()
    (tmp_path / "notes.txt").write_text("")
    assert [n for n, _ in discover(tmp_path)] == ["a", "b"]
    assert [n for n, _ in discover(tmp_path, only=["b"])] == ["b"]


def test_markdown_has_a_row_per_task() -> None:
    report = {
        "tasks": [
            {"task": "x", "status": "correct", "rule": None, "reward": 2.0, "speedup_eager": 1.2, "speedup_compile": None, "message": "ok"},
            {"task": "y", "status": "rejected", "rule": "T19.runtime.output_aliases_input", "reward": -1.0,
             "speedup_eager": None, "speedup_compile": None, "message": "a|b"},
        ],
        "summary": {"backend": "cpu", "n": 2, "correct": 1, "pass_rate": 0.5, "faster_than_eager_rate": 0.5,
                    "faster_than_compile_rate": 0.0, "geomean_speedup_eager": 1.2, "geomean_speedup_compile": None,
                    "mean_reward": 0.5, "reward_name": "milestone"},
    }
    md = render_markdown(report)
    assert "| x | correct |" in md and "T19.runtime.output_aliases_input" in md and "a\\|b" in md


@pytest.mark.slow
def test_score_command_end_to_end(tmp_path: Path, run_score) -> None:  # type: ignore[no-untyped-def]
    solutions = tmp_path / "solutions"
    tasks = tmp_path / "tasks"
    solutions.mkdir()
    tasks.mkdir()
    shutil.copy(REPO / "examples" / "tasks" / "swish.py", tasks / "swish.py")
    shutil.copytree(REPO / "examples" / "solutions" / "cpu" / "swish", solutions / "swish")
    # A solution whose kernel does not compile.
    shutil.copy(REPO / "examples" / "tasks" / "swish.py", tasks / "broken.py")
    shutil.copytree(REPO / "examples" / "solutions" / "cpu" / "swish", solutions / "broken")
    (solutions / "broken" / "kernels" / "swish.cpp").write_text("this is not C++\n")
    # A solution without a task file.
    (solutions / "orphan").mkdir()
    (solutions / "orphan" / "model_new.py").write_text("")
    out = tmp_path / "out"
    report = run_score(solutions, tasks, out)
    rows = {r["task"]: r for r in report["tasks"]}
    assert set(rows) == {"swish", "broken", "orphan"}
    for r in rows.values():
        assert {"task", "status", "rule", "reward", "speedup_eager", "speedup_compile", "message"} <= set(r)
    assert rows["swish"]["status"] == "correct", rows["swish"]["message"]
    assert rows["swish"]["speedup_eager"] is not None and rows["swish"]["reward"] is not None
    assert rows["broken"]["status"] == "compile_error"
    assert rows["orphan"]["status"] == "error" and "no task file" in rows["orphan"]["message"]
    assert report["summary"]["n"] == 3 and report["summary"]["correct"] == 1
    assert (out / "report.md").read_text().count("\n| ") >= 4
