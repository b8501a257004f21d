"""report.json / report.md / PNG plots from the fixture run, several runs side by side."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.evaluation.cli import main as cli_main

FIXTURE = Path(__file__).parent / "fixtures" / "run_small"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    a, b = root / "agent", root / "final_only"
    shutil.copytree(FIXTURE, a)
    shutil.copytree(FIXTURE, b)
    # run b: drop the gemm episodes so the two runs differ
    for d in (b / "episodes").glob("gemm_relu__*"):
        shutil.rmtree(d)
    (b / "sessions").mkdir()
    (b / "sessions" / "0000.json").write_text(json.dumps(
        {"wall_s": 20.0, "devices": [{"index": 0, "busy_s": 5.0, "wait_s": 1.0, "calls": 4}], "episodes_run": 2,
         "max_in_flight": 2, "overlap_s": 3.0}))
    return a, b


def test_report_command_writes_json_md_and_plots(two_runs, tmp_path):
    dest = tmp_path / "rep"
    assert cli_main(["report", str(two_runs[0]), str(two_runs[1]), "--dest", str(dest)]) == 0
    report = json.loads((dest / "report.json").read_text())
    assert [r["name"] for r in report["runs"]] == ["agent", "final_only"]
    assert report["runs"][0]["metrics"]["best"]["regraded"]["overall"]["pass_rate"] == 0.75
    assert report["runs"][1]["metrics"]["best"]["regraded"]["overall"]["pass_rate"] == 1.0
    assert report["runs"][1]["queue"]["devices"]["0"]["utilisation"] == 0.25  # 5 s busy / 20 s
    assert "pass_rate" in report["definitions"]
    md = (dest / "report.md").read_text()
    assert "| agent | best | 4 | 75.0% (75.0%)" in md
    assert "held-out false pass" in md and "dev0: 25.0%" in md
    for name in ("budget_curves.png", "speedup_by_level.png", "cost_vs_speedup.png"):
        data = (dest / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert report["plots"] == ["budget_curves.png", "speedup_by_level.png", "cost_vs_speedup.png"]


def test_report_refuses_a_folder_that_is_not_an_eval(tmp_path, capsys):
    assert cli_main(["report", str(tmp_path), "--dest", str(tmp_path / "r"), "--no-plots"]) == 2
    assert "not an eval output folder" in capsys.readouterr().err


def test_unfinished_episodes_are_counted_not_reported(two_runs, tmp_path):
    from cuda_agent.harness.evaluation.report import build_report

    run = tmp_path / "partial"
    shutil.copytree(two_runs[0], run)
    (run / "episodes" / "relu__seed1" / "eval.json").unlink()
    rep = build_report([run])["runs"][0]
    assert rep["episodes_unfinished"] == 1
    assert rep["metrics"]["best"]["n_episodes"] == 3


def test_failures_are_drawn_below_every_correct_speedup():
    from cuda_agent.harness.evaluation.plots import failure_floor

    assert failure_floor([]) == 0.1
    assert failure_floor([0.9, 2.0]) == 0.1
    # A correct candidate at 0.0156x (the H200 example conv2d_relu vs torch.compile) must stay above the failures.
    assert failure_floor([0.9, 0.0156]) == 0.0078
