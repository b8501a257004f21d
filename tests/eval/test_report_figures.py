"""Reports people act on: the figures (both baselines, a marker per run, labels), the tables, rounding, warnings."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.evaluation.report import build_report, write_report

FIXTURE = Path(__file__).parent / "fixtures" / "run_small"


def copy_run(root: Path, name: str, *, backend: str | None = None, budget: bool = False, no_levels: bool = False,
             level: int | None = None) -> Path:
    """The fixture run under another name; optionally with a saved config, budget regrades, one level or none."""
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
        if level is not None:
            record["level"] = level
        path.write_text(json.dumps(record))
    return run


@pytest.fixture()
def twins(tmp_path):
    """Two identical runs: the plots must still show both."""
    return [copy_run(tmp_path, "twin_a"), copy_run(tmp_path, "twin_b")]


@pytest.fixture()
def render(monkeypatch, tmp_path):
    """Render the plots of a report the way ``cuda-agent report`` does, keeping each figure (by file name)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from cuda_agent.harness.evaluation.plots import render_plots

    kept, real = {}, Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        kept[Path(fname).name] = self
        return real(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)

    def run(runs):
        report = build_report(runs)
        render_plots(report, tmp_path / "plots")
        return report, kept

    return run


def _axis(fig, word):
    matches = [ax for ax in fig.axes if word in ax.get_title()]
    assert matches, f"no panel titled with {word!r}: {[ax.get_title() for ax in fig.axes]}"
    return matches[0]


def test_budget_curves_come_from_the_regrades_with_a_marker_per_run(tmp_path, render):
    from cuda_agent.harness.evaluation.records import EvalRecord

    assert "budget" in EvalRecord.model_fields  # eval.json keeps the trusted regrades at the budget points
    report, figs = render([copy_run(tmp_path, "twin_a", budget=True), copy_run(tmp_path, "twin_b", budget=True)])
    curve = report["runs"][0]["metrics"]["best"]["budget_curve"]
    assert curve.get("source") == "regraded" and curve["turns"] == [1, 3]
    fig = figs["budget_curves.png"]
    assert "trusted regrades" in fig._suptitle.get_text()
    _axis(fig, "eager"), _axis(fig, "torch.compile")
    lines = [line for line in _axis(fig, "pass rate").get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in lines] == ["twin_a", "twin_b"]
    assert len({(line.get_marker(), line.get_linestyle(), str(line.get_markerfacecolor())) for line in lines}) == 2
    assert list(lines[0].get_xdata()) == [1, 3] and list(lines[0].get_ydata()) == [0.0, 75.0]


def test_speedups_show_eager_beside_compile_with_labels_and_a_visible_median(tmp_path, render):
    run = copy_run(tmp_path, "one_level", level=1)  # three correct candidates in one group: a box
    _, figs = render([run])
    fig = figs["speedup_by_level.png"]
    eager_ax, compile_ax = _axis(fig, "vs eager"), _axis(fig, "vs torch.compile")
    for ax, key in ((eager_ax, "speedup_eager"), (compile_ax, "speedup_compile")):
        points = sorted(v for coll in ax.collections for v in coll.get_offsets()[:, 1])
        bests = [json.loads(p.read_text())["regrades"].get("best") for p in run.glob("episodes/*/eval.json")]
        expected = sorted(b[key] for b in bests if b and b["status"] == "correct")
        assert points == pytest.approx(expected) and len(points) == 3
        assert {t.get_text() for t in ax.texts} == {"relu s0", "relu s1", "gemm_relu s0"}
        assert [t.get_text() for t in ax.get_xticklabels()] == ["level 1"]
        medians = [ln for ln in ax.get_lines() if ln.get_color() == "black" and ln.get_linewidth() > 2]
        assert len(medians) == 1  # the box's median line is black, not the box's colour


def test_a_run_without_levels_gets_one_normal_group(tmp_path, render):
    _, figs = render([copy_run(tmp_path, "no_levels", no_levels=True)])
    ax = figs["speedup_by_level.png"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["all tasks (no levels)"]
    lo, hi = ax.get_xlim()
    assert hi - lo <= 1.5  # one group, not a box stretched over the whole figure


def test_cost_plot_has_both_baselines_and_distinct_markers(twins, render):
    _, figs = render(twins)
    fig = figs["cost_vs_speedup.png"]
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
    warnings = report.get("warnings") or [""]
    assert "cover different tasks" in warnings[0] and "> **Warning:**" in md
    assert "## Per task" in md and "| cpu_run | fx/gemm_relu | 2 | 2 | 1/2 correct | 2.50x | 2.00x |" in md
    assert "## Exit reasons" in md and "| cpu_run | max_turns | 2 |" in md
    assert "None" not in md and not re.search(r"\d\.\d{4,}", md)
    assert report["runs"][0]["queue"] is None and "GPU-queue" not in md
    episode = next(e for e in report["runs"][0]["episodes"] if e["task_id"] == "fx/gemm_relu" and e["seed_index"] == 0)
    assert episode["speedups"]["best"] == {"eager": 2.5, "compile": 2.0}
