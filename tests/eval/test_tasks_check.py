"""``cuda-agent tasks check``: the self-check of a task suite, end to end on the CPU backend (issue 21, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.harness.suite_check import CheckRow
from cuda_agent.harness.suite_report import summarize

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "check.yaml"
    cfg.write_text("plugins:\n  cpu:\n    harness:\n      verify: {input_sets: 2}\n"
                   f"      timing: {{preset: quick, compile_baseline: false, baseline_cache_dir: {tmp_path / 'bl'}}}\n")
    return cfg


@pytest.mark.slow
def test_tasks_check_grades_each_tasks_own_model_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from cuda_agent.cli import main

    out = tmp_path / "check"
    args = ["tasks", "check", f"folder:{ROOT / 'examples' / 'tasks'}", "--backend", "cpu", "--out", str(out),
            "--limit", "2", "-c", str(_config(tmp_path)), "-o", "eval.progress=false"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "checked 2 of 2 task(s) on cpu: 2 correct" in first
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["by_status"] == {"correct": 2}
    for row in report["rows"]:
        assert row["samples_ms"]["candidate"] and row["samples_ms"]["eager"]  # the runner's own calls, and eager's
        assert row["speedup_eager"] is not None and 0.2 < row["speedup_eager"] < 5  # the same code both sides
        assert row["bytes_per_set"] > 0 and row["reference_sets"] >= 1 and row["phase_s"]["forward_calls"] > 0
        assert "rules against PyTorch compute" in row["note"]
    assert (out / "report.md").read_text().count("| correct |") == 2
    assert (out / "self_speedup.png").stat().st_size > 0
    lines = (out / "rows.jsonl").read_text().splitlines()
    # The same command again: nothing left to check, nothing checked twice.
    assert main(args) == 0
    assert (out / "rows.jsonl").read_text().splitlines() == lines
    assert "checked 2 of 2" in capsys.readouterr().out
    # Another plan in the same folder is refused.
    other = [a if a != "2" else "3" for a in args]
    assert main(other) == 2
    assert "another plan" in capsys.readouterr().err


def test_the_summary_counts_statuses_and_the_band() -> None:
    rows = [CheckRow(task_id="a", status="correct", speedup_eager=1.01),
            CheckRow(task_id="b", status="correct", speedup_eager=0.90),
            CheckRow(task_id="c", status="too_large", reason="needs 150 GiB"),
            CheckRow(task_id="d", status="correct", speedup_eager=1.0, eager_over_compile=1.25)]
    s = summarize(rows, planned=5)
    assert s["by_status"] == {"correct": 3, "too_large": 1} and s["checked"] == 4 and s["planned"] == 5
    assert s["pass_rate"] == 0.75 and s["median_self_speedup_eager"] == 1.0
    assert s["within_band_share"] == round(2 / 3, 4) and s["outside_band"] == ["b"]
    assert s["not_passing"] == {"c": "too_large: needs 150 GiB"}
    assert s["median_eager_over_compile"] == 1.25
