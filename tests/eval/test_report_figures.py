"""Reports people act on: the figures (both baselines, a marker per run, labels), the tables, rounding, warnings."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.evaluation.records import EpisodeSummary, SelectionOutcome, Verdict
from cuda_agent.harness.evaluation.report import build_report, write_report

FIXTURE = Path(__file__).parent / "fixtures" / "run_small"


def copy_run(root: Path, name: str, *, backend: str | None = None, budget: bool = False, no_levels: bool = False) -> Path:
    """The fixture run under another name; optionally with a saved config, budget regrades, or no task levels."""
    run = root / name
    shutil.copytree(FIXTURE, run)
    if backend is not None:
        (run / "config.json").write_text(json.dumps({"config": {"backend": backend, "policy": "scripted:x.yaml",
                                                                "agent": {"max_turns": 3}, "eval": {"tasks": "folder:t"}},
                                                     "config_hash": "sha256:0123456789abcdef"}))
    for path in run.glob("episodes/*/eval.json"):
        record = json.loads(path.read_text())
        if budget:
            best = record["regrades"].get("best")
            verdict = {k: best.get(k) for k in ("status", "speedup_eager", "speedup_compile", "rule")} if best else None
            record["budget"] = [{"turn": 1, "snapshot_id": None, "regraded": None},
                                {"turn": 3, "snapshot_id": best and best.get("snapshot_id"), "regraded": verdict}]
        if no_levels:
            record["level"] = None
        path.write_text(json.dumps(record))
    return run


@pytest.fixture()
def twins(tmp_path):
    """Two identical runs with budget regrades: the plots must still show both."""
    return [copy_run(tmp_path, "twin_a", budget=True), copy_run(tmp_path, "twin_b", budget=True)]


def test_budget_curves_come_from_the_regrades_with_a_marker_per_run(twins):
    from cuda_agent.harness.evaluation.plots import figure_budget_curves

    report = build_report(twins)
    curve = report["runs"][0]["metrics"]["best"]["budget_curve"]
    assert curve["source"] == "regraded" and curve["turns"] == [1, 3]
    fig = figure_budget_curves(report)
    assert "trusted regrades" in fig._suptitle.get_text()
    titles = [ax.get_title() for ax in fig.axes]
    assert any("eager" in t for t in titles) and any("torch.compile" in t for t in titles)
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["twin_a", "twin_b"]
    assert len({(line.get_marker(), line.get_linestyle(), str(line.get_markerfacecolor())) for line in lines}) == 2
    assert list(lines[0].get_xdata()) == [1, 3] and list(lines[0].get_ydata()) == [0.0, 75.0]


def _summary(task: str, level: int | None, eager: float, compile_: float, seed: int = 0) -> EpisodeSummary:
    verdict = Verdict(status="correct", speedup_eager=eager, speedup_compile=compile_)
    return EpisodeSummary(episode=f"{task}__seed{seed}", task_id=f"t/{task}", level=level, seed_index=seed,
                          selections={"best": SelectionOutcome(mode="best", turn=1, snapshot_id="sha256:1",
                                                               in_trajectory=verdict, regraded=verdict)})


def test_speedups_show_eager_beside_compile_with_labels_and_a_visible_median():
    from cuda_agent.harness.evaluation.plots import figure_speedup_by_level

    episodes = [_summary(f"op{i}", 1, 1.0 + 0.3 * i, 0.8 + 0.2 * i) for i in range(4)] + [_summary("big", 2, 3.0, 2.0)]
    report = {"runs": [{"name": "run", "_summaries": episodes}]}
    fig = figure_speedup_by_level(report)
    eager_ax, compile_ax = fig.axes
    assert "eager" in eager_ax.get_title() and "torch.compile" in compile_ax.get_title()
    for ax, values in ((eager_ax, [1.0, 1.3, 1.6, 1.9, 3.0]), (compile_ax, [0.8, 1.0, 1.2, 1.4, 2.0])):
        points = sorted(v for coll in ax.collections for v in coll.get_offsets()[:, 1])
        assert points == pytest.approx(values)
        assert {t.get_text() for t in ax.texts} >= {"op0", "op3", "big"}
        assert [t.get_text() for t in ax.get_xticklabels()] == ["level 1", "level 2"]
        medians = [ln for ln in ax.get_lines() if ln.get_color() == "black" and ln.get_linewidth() > 2]
        assert len(medians) == 1  # level 1 has four points: a box whose median line is black, not the box's colour


def test_a_run_without_levels_gets_one_normal_group():
    from cuda_agent.harness.evaluation.plots import figure_speedup_by_level

    report = {"runs": [{"name": "run", "_summaries": [_summary("a", None, 1.2, 0.9), _summary("b", None, 2.0, 1.5)]}]}
    ax = figure_speedup_by_level(report).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["all tasks (no levels)"]
    lo, hi = ax.get_xlim()
    assert hi - lo <= 1.5  # one group, not a box stretched over the whole figure


def test_cost_plot_has_both_baselines_and_distinct_markers(twins):
    from cuda_agent.harness.evaluation.plots import figure_cost_vs_speedup

    fig = figure_cost_vs_speedup(build_report(twins))
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert any("eager" in y for y in labels) and any("torch.compile" in y for y in labels)
    correct = [c for c in fig.axes[0].collections if c.get_label().endswith(" correct")]
    assert [c.get_label() for c in correct] == ["twin_a correct", "twin_b correct"]
    faces = [tuple(c.get_facecolor()[0]) if len(c.get_facecolor()) else "none" for c in correct]
    assert faces[0] != faces[1]  # the second run is hollow: drawn over the first, both stay visible


def test_report_tables_round_numbers_warn_and_skip_the_gpu_queue_on_cpu(tmp_path):
    full = copy_run(tmp_path, "cpu_run", backend="cpu")
    partial = copy_run(tmp_path, "fewer_tasks", backend="cpu")
    for d in (partial / "episodes").glob("gemm_relu__*"):
        shutil.rmtree(d)
    report = write_report([full, partial], tmp_path / "report", plots=False)
    md = (tmp_path / "report" / "report.md").read_text()
    assert report["warnings"] and "cover different tasks" in report["warnings"][0] and "> **Warning:**" in md
    assert "## Per task" in md and "| cpu_run | fx/gemm_relu | 2 | 2 | 1/2 correct | 2.50x | 2.00x |" in md
    assert "## Exit reasons" in md and "| cpu_run | max_turns | 2 |" in md
    assert "None" not in md and not re.search(r"\d\.\d{4,}", md)
    assert report["runs"][0]["queue"] is None and "GPU-queue" not in md
    episode = next(e for e in report["runs"][0]["episodes"] if e["task_id"] == "fx/gemm_relu" and e["seed_index"] == 0)
    assert episode["speedups"]["best"] == {"eager": 2.5, "compile": 2.0}
