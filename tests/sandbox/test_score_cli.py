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


def _score_cli(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    from cuda_agent.cli import main

    rc = main(["score", *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _solutions(tmp_path: Path) -> tuple[Path, Path]:
    solutions, tasks = tmp_path / "solutions", tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(REPO / "examples" / "tasks" / "swish.py", tasks / "swish.py")
    shutil.copytree(REPO / "examples" / "solutions" / "cpu" / "swish", solutions / "swish")
    return solutions, tasks


def test_an_unusable_backend_fails_at_once_and_writes_nothing(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the cuda backend is usable here")
    solutions, tasks = _solutions(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    rc, out, err = _score_cli(tmp_path, capsys, str(solutions), "--tasks", str(tasks), "--backend", "cuda",
                              "--out", str(tmp_path / "out"))
    assert rc == 2 and "backend 'cuda' is not usable here" in err
    assert not (tmp_path / "out").exists()


def test_unknown_only_names_fail_listing_the_valid_ones(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    solutions, tasks = _solutions(tmp_path)
    rc, out, err = _score_cli(tmp_path, capsys, str(solutions), "--tasks", str(tasks), "--backend", "cpu",
                              "--out", str(tmp_path / "out"), "--only", "swsh")
    assert rc == 2 and "--only swsh: no such solution" in err and "valid: swish" in err
    assert not (tmp_path / "out").exists()


def test_kernelbench_only_names_are_the_run_files(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_1_problem_19_sample_0_kernel.py").write_text("")
    spec = f"kernelbench:{REPO / 'tests' / 'kernelbench' / 'data'}"
    rc, out, err = _score_cli(tmp_path, capsys, str(run), "--tasks", spec, "--backend", "cpu",
                              "--out", str(tmp_path / "out"), "--only", "level_1_problem_19_sample_1_kernel")
    assert rc == 2 and "valid: level_1_problem_19_sample_0_kernel" in err
