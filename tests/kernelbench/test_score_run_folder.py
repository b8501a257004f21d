"""``cuda-agent score`` on a KernelBench run folder: files mapped to problems by level and id, samples, fast_p."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.evaluation.task_sources import iter_kernelbench
from cuda_agent.harness.score_kernelbench import kernelbench_summary, map_solutions, problem_index

from .conftest import DATA, PINNED, SOLUTIONS


def test_run_files_map_to_problems_by_level_and_id(tmp_path: Path) -> None:
    for name in ("level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_3_kernel.py",
                 "level_2_problem_12_sample_0_kernel.py", "level_1_problem_77_sample_0_kernel.py", "23_Softmax.py",
                 "notes.py"):
        (tmp_path / name).write_text("")
    index = problem_index(f"kernelbench:{DATA}")
    assert set(index) == {(1, 1), (1, 19), (1, 23), (2, 12), (3, 1)}
    mapped, unmapped = map_solutions(tmp_path, index)
    assert [(m.name, m.level, m.problem, m.sample) for m in mapped] == [
        ("level_1_problem_19_sample_0_kernel", 1, 19, 0), ("level_1_problem_19_sample_3_kernel", 1, 19, 3),
        ("23_Softmax", 1, 23, 0), ("level_2_problem_12_sample_0_kernel", 2, 12, 0)]
    assert sorted(name for name, _ in unmapped) == ["level_1_problem_77_sample_0_kernel", "notes"]
    assert any("no problem 77 of level 1" in why for _, why in unmapped)
    with pytest.raises(ValueError, match="valid: levels, ids, sizes"):
        problem_index(f"kernelbench:{DATA}?level=1")


def _row(task: str, problem: str, sample: int, status: str, speedup: float | None) -> dict:
    return {"task": task, "status": status, "speedup_eager": speedup, "speedup_compile": None,
            "kernelbench": {"problem_id": problem, "sample": sample, "commit": PINNED, "comparable_to_published": True}}


def test_fast_p_is_kernelbenchs_definition_over_problems() -> None:
    rows = [_row("a0", "p/a", 0, "correct", 0.7), _row("a1", "p/a", 1, "correct", 1.6),  # best: 1.6
            _row("b0", "p/b", 0, "incorrect", None), _row("b1", "p/b", 1, "correct", 1.2),  # best: 1.2
            _row("c0", "p/c", 0, "rejected", None),  # never correct
            _row("d0", "p/d", 0, "correct", 1.0)]  # correct, not faster than 1.0
    s = kernelbench_summary(rows)
    assert s["problems"] == 4 and s["samples"] == 6
    assert s["fast_p"] == {"fast_0": 0.75, "fast_0.5": 0.75, "fast_0.8": 0.75, "fast_1": 0.5, "fast_1.5": 0.25,
                           "fast_2": 0.0}
    # Averaged over samples: a 1.0, b 0.5, c 0, d 1 -> fast_0 = 2.5 / 4.
    assert s["fast_p_mean_over_samples"]["fast_0"] == 0.625
    assert s["per_problem"]["p/a"]["best"]["sample"] == 1 and len(s["per_problem"]["p/a"]["all"]) == 2
    assert s["per_problem"]["p/b"]["best"] == {"solution": "b1", "sample": 1, "status": "correct",
                                               "speedup_eager": 1.2, "speedup_compile": None}


@pytest.mark.slow
def test_a_kernelbench_run_folder_scores_without_renaming(tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    run.mkdir()
    honest = SOLUTIONS / "single_file" / "cpu"
    shutil.copy(honest / "level_1_problem_19_sample_0_kernel.py", run / "level_1_problem_19_sample_0_kernel.py")
    # Sample 1 of the same problem: the forward falls back to PyTorch (THREATS class 1).
    cheat = (honest / "level_1_problem_19_sample_0_kernel.py").read_text().replace(
        "return ext.relu_forward(x)", "return torch.relu(x)")
    (run / "level_1_problem_19_sample_1_kernel.py").write_text(cheat)
    (run / "level_4_problem_1_sample_0_kernel.py").write_text("")  # not in the task source
    rc, report = score(run, f"kernelbench:{DATA}?sizes=reduced", "cpu", tmp_path / "out")
    rows = {r["task"]: r for r in report["tasks"]}
    assert rows["level_1_problem_19_sample_0_kernel"]["status"] == "correct", rows
    assert rows["level_1_problem_19_sample_1_kernel"]["status"] == "rejected"
    assert rows["level_1_problem_19_sample_1_kernel"]["rule"] == "T1.python.torch_call"
    assert rows["level_4_problem_1_sample_0_kernel"]["status"] == "error"
    assert rc == 1  # not every solution graded correct
    kb = report["summary"]["kernelbench"]
    assert kb["problems"] == 1 and kb["samples"] == 2 and kb["commits"] == [PINNED]
    assert kb["fast_p"]["fast_0"] == 1.0 and kb["fast_p_mean_over_samples"]["fast_0"] == 0.5
    assert kb["per_problem"]["kernelbench/level1/19_ReLU"]["best"]["sample"] == 0
    assert kb["comparable_to_published"] is False
    md = (tmp_path / "out" / "report.md").read_text()
    assert "fast_0 1.0" in md and "NOT comparable to published" in md
    relu = next(t for t in iter_kernelbench(DATA) if t.name == "19_ReLU")
    assert rows["level_1_problem_19_sample_0_kernel"]["kernelbench"]["file_sha256"] == relu.upstream.file_sha256


def test_only_leaves_out_the_files_that_map_to_no_task(tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    # Session 37's H100 run of the full-size convention tests: `--only` two solutions over a source of two problems
    # still reported the folder's other three solutions as error rows (no such problem in that source), so a run
    # asked for two correct grades exited 1.
    run = tmp_path / "run"
    run.mkdir()
    for name in ("19_ReLU.py", "23_Softmax.py", "level_4_problem_1_sample_0_kernel.py", "notes.py"):
        (run / name).write_text("")  # an empty 23_Softmax.py maps to its problem and fails to grade, quickly
    rc, report = score(run, f"kernelbench:{DATA}?levels=1&ids=23&sizes=reduced", "cpu", tmp_path / "out",
                       "--only", "23_Softmax")
    assert [r["task"] for r in report["tasks"]] == ["23_Softmax"], report["tasks"]
    assert report["tasks"][0]["status"] != "correct" and rc == 1
    # Without --only the files that map to no problem of the source are error rows, each saying why.
    rc, report = score(run, f"kernelbench:{DATA}?levels=1&ids=23&sizes=reduced", "cpu", tmp_path / "out2")
    why = {r["task"]: r["message"] for r in report["tasks"] if r["status"] == "error" and r["task"] != "23_Softmax"}
    assert sorted(why) == ["19_ReLU", "level_4_problem_1_sample_0_kernel", "notes"], report["tasks"]
    assert "no problem 1 of level 4" in why["level_4_problem_1_sample_0_kernel"]
