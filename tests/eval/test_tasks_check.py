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
        assert row["call_work_s"]["timed"] > 0 and row["call_work_s"]["input_fingerprints"] >= 0
        # where the task's seconds went: the probe, the warm-up, the wait for the device and the device itself
        assert set(row["stage_s"]) == {"probe", "warm", "device_wait", "device"}
        assert row["stage_s"]["device"] > 0 and sum(row["stage_s"].values()) <= row["seconds"] + 0.01
        assert "rules against PyTorch compute" in row["note"]
        # the fresh-set rule's look at the graded pass is kept (a gap on the task's own Model is the harness's)
        assert row["fresh_sets"]["calls"] >= 1 and row["fresh_sets"]["reported"] in ("all", "confirmation", "fresh")
        assert isinstance(row["flags"], list)
        assert row["device_steps"] == 1 and row["baseline_alloc_retries"] == {}  # no caching allocator on CPU
        # the graded pass's timed batches held the device's lock alone, within its device stage; its start time
        assert 0 < row["device_lock"]["exclusive_s"] <= row["stage_s"]["device"]
        assert row["device_lock"]["exclusive_takes"] >= 2 and row["started_at"] > 0
        assert row["baseline_host"]["eager"]["calls"] > 0
        assert row["device"]  # the CPU's model name: a suite resumed elsewhere counts its rows per device
    assert (out / "report.md").read_text().count("| correct |") == 2
    assert "graded parts one at a time:" in (out / "report.md").read_text()
    run = report["summary"]["timeline"]["runs"]
    assert len(run) == 1 and run[0]["tasks"] == 2 and 0 < run[0]["exclusive_s"] < run[0]["span_s"]
    assert "## Where the suite's time goes" in (out / "report.md").read_text()
    assert report["summary"]["devices"] == {report["rows"][0]["device"]: 2}
    assert f"- rows per device: {report['rows'][0]['device']} 2" in (out / "report.md").read_text()
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
    assert s["fresh_sets_charged"] == []
    charged = CheckRow(task_id="e", status="correct", speedup_eager=0.82, flags=["fresh_inputs_slower"],
                       fresh_sets={"calls": 1, "median_ms": 3.2, "neighbours_median_ms": 2.65, "reported": "fresh"})
    assert summarize([*rows, charged], planned=5)["fresh_sets_charged"] == ["e"]
    rows[0].phase_s, rows[3].phase_s = {"forward_calls": 2.0, "check": 1.0}, {"forward_calls": 3.5}
    rows[0].call_work_s, rows[3].call_work_s = {"timed": 0.5, "round_trip": 1.5}, {"timed": 1.0, "input_fingerprints": 2.5}
    s = summarize(rows, planned=5)
    assert s["phase_s"] == {"forward_calls": 5.5, "check": 1.0}
    assert s["call_work_s"] == {"input_fingerprints": 2.5, "timed": 1.5, "round_trip": 1.5}
    assert list(s["phase_s"]) == ["forward_calls", "check"]  # largest first
    rows[0].stage_s, rows[2].stage_s = {"probe": 1.0, "device": 4.0}, {"probe": 2.0}
    assert summarize(rows, planned=5)["stage_s"] == {"device": 4.0, "probe": 3.0}


def test_the_report_names_baselines_timed_short_of_memory_and_what_device_steps_make_of_the_sum(
        tmp_path: Path) -> None:
    from cuda_agent.harness.suite_report import write_report

    rows = [CheckRow(task_id="kb/16_ConvTranspose2d", status="correct", speedup_eager=1.98, device_steps=2,
                     baseline_alloc_retries={"eager": 97, "compile": 0}, stage_s={"device": 27.3}),
            CheckRow(task_id="kb/19_ReLU", status="correct", speedup_eager=1.0, device_steps=2,
                     baseline_alloc_retries={"eager": 0, "compile": 0}, stage_s={"device": 8.0})]
    report = write_report(tmp_path, rows, planned=2, backend="cuda", tasks_spec="kernelbench:KB")
    assert report["summary"]["baselines_short_of_memory"] == {"kb/16_ConvTranspose2d": {"eager": 97, "compile": 0}}
    text = (tmp_path / "report.md").read_text()
    assert "## Baselines timed short of device memory" in text and "- `kb/16_ConvTranspose2d`: eager 97" in text
    assert "19_ReLU`:" not in text
    assert "eval.device_steps 2: graded parts overlapped" in text and "one at a time" not in text
    rows[0].baseline_prepare = {"seconds": 1.75, "compiles": 2}
    rows[1].baseline_prepare = {"seconds": 0.01, "compiles": 0}
    write_report(tmp_path, rows, planned=2, backend="cuda", tasks_spec="kernelbench:KB")
    text = (tmp_path / "report.md").read_text()
    assert "## Compile baseline compiled again inside the graded pass" in text
    assert "- `kb/16_ConvTranspose2d`" in text.split("compiled again")[1] and "19_ReLU`" not in text.split("compiled again")[1]
    rows[1].baseline_prepare = {"seconds": 1.0, "compiles": 1, "cold": 1}  # a process started after the warm-up
    report = write_report(tmp_path, rows, planned=2, backend="cuda", tasks_spec="kernelbench:KB")
    assert report["summary"]["recompiled_in_grade"] == ["kb/16_ConvTranspose2d"]
    assert report["summary"]["compiled_cold_in_grade"] == ["kb/19_ReLU"]
    assert "## Compile baseline compiled afresh inside the graded pass" in (tmp_path / "report.md").read_text()
    old = CheckRow(task_id="x", status="correct", speedup_eager=1.0, stage_s={"device": 1.0})  # a row from before
    write_report(tmp_path, [old], planned=1, backend="cuda", tasks_spec="kernelbench:KB")
    assert "device_steps not recorded" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_shards_check_their_share_and_their_rows_join_into_one_report(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """One shard per GPU (``--shard K/N``): each checks every N-th task of the whole plan; the shards' rows joined
    in one folder are the whole suite's resume state, and ``--report-only`` reports them without a device."""
    from cuda_agent.cli import main

    cfg = str(_config(tmp_path))

    def args(out: Path, *extra: str) -> list[str]:
        return ["tasks", "check", f"folder:{ROOT / 'examples' / 'tasks'}", "--backend", "cpu", "--out", str(out),
                "--limit", "3", "-c", cfg, "-o", "eval.progress=false", *extra]

    a, b = tmp_path / "shard0", tmp_path / "shard1"
    assert main(args(a, "--shard", "0/2")) == 0
    assert "checked 2 of 2 task(s)" in capsys.readouterr().out
    assert main(args(b, "--shard", "1/2")) == 0
    assert "checked 1 of 1 task(s)" in capsys.readouterr().out
    ids_a = [json.loads(x)["task_id"] for x in (a / "rows.jsonl").read_text().splitlines()]
    ids_b = [json.loads(x)["task_id"] for x in (b / "rows.jsonl").read_text().splitlines()]
    assert len(ids_a) == 2 and len(ids_b) == 1 and not set(ids_a) & set(ids_b)
    assert (a / "plan.json").read_text() == (b / "plan.json").read_text()  # the whole suite's plan in each

    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from join_check_rows import join  # what gpu_session.sh's kb_join part runs over the lanes' folders

    joined = tmp_path / "joined"
    assert join([a, b], joined) == {"folders": 2, "rows_read": 3, "tasks": 3}
    assert main(args(joined, "--report-only")) == 0
    assert "checked 3 of 3 task(s) on cpu: 3 correct" in capsys.readouterr().out
    assert json.loads((joined / "report.json").read_text())["summary"]["checked"] == 3

    assert main(args(tmp_path / "bad", "--shard", "2/2")) == 2
    assert "0 <= K < N" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "plan.json").write_text(json.dumps({"tasks": "folder:x", "backend": "cpu", "task_ids": []}))
    with pytest.raises(SystemExit, match="different plans"):
        join([a, tmp_path / "other"], tmp_path / "j2")


@pytest.mark.slow
def test_graded_parts_may_overlap_as_eval_device_steps_do(tmp_path: Path) -> None:
    """``eval.device_steps=2``: two tasks' graded parts share the device (their timed batches take its lock
    exclusively, their untimed work holds it shared); every task still grades correct and nothing waits forever."""
    from cuda_agent.cli import main

    out = tmp_path / "check"
    args = ["tasks", "check", f"folder:{ROOT / 'examples' / 'tasks'}", "--backend", "cpu", "--out", str(out),
            "--limit", "3", "--concurrency", "3", "-c", str(_config(tmp_path)), "-o", "eval.progress=false",
            "--device-steps", "2"]
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["by_status"] == {"correct": 3}
    assert all(row["stage_s"]["device"] > 0 for row in report["rows"])



@pytest.mark.slow
def test_outliers_are_checked_again_alone_after_the_suite_and_keep_both_looks(tmp_path: Path) -> None:
    """``--recheck-outliers``: a correct task outside the band is checked once more by itself after the suite; its
    row keeps the suite's figures and gains the alone ones, and a resume does not check it a third time. The band
    is set below any self-speedup here (-1: every correct task is an outlier), so the test does not rest on
    timing noise."""
    from cuda_agent.config import load_config
    from cuda_agent.harness.evaluation.config import EvalConfig
    from cuda_agent.harness.suite_check import SuiteCheck, done_rows
    from cuda_agent.plugin_manager import PluginManager

    out = tmp_path / "check"
    config = load_config(EvalConfig, [_config(tmp_path)], [
        f"eval.tasks={json.dumps('folder:' + str(ROOT / 'examples' / 'tasks'))}", "backend=cpu", "eval.limit=2",
        "eval.progress=false"])
    report = SuiteCheck(config, out, PluginManager(), recheck_outliers=True, recheck_band=-1.0).run()
    rows = done_rows(out)
    assert len(rows) == 2 and len((out / "rows.jsonl").read_text().splitlines()) == 4  # each task, then its look
    for row in rows.values():
        assert row.status == "correct" and row.alone is not None
        assert row.alone["status"] == "correct" and row.alone["speedup_eager"] > 0
        assert row.alone["candidate_ms"] > 0 and row.alone["eager_ms"] > 0 and row.alone["seconds"] > 0
        assert row.samples_ms["candidate"]  # the suite's own figures stay
    assert set(report["summary"]["outliers_alone"]) == set(rows)
    assert "## Outliers checked again alone" in (out / "report.md").read_text()
    # A resume finds every outlier looked at: nothing runs again.
    SuiteCheck(config, out, PluginManager(), recheck_outliers=True, recheck_band=-1.0).run()
    assert len((out / "rows.jsonl").read_text().splitlines()) == 4


@pytest.mark.slow
def test_too_large_rows_and_named_tasks_are_checked_again_when_asked(tmp_path: Path) -> None:
    """``--retry-too-large`` (a resume on a larger GPU) checks again the tasks whose row says ``too_large``;
    ``--redo TASK`` (a resume after a harness fix) checks again every task whose id contains TASK. Without them a
    resume checks nothing twice. The saved state is one task's row set to ``too_large``, as a smaller device
    leaves it."""
    from cuda_agent.config import load_config
    from cuda_agent.harness.evaluation.config import EvalConfig
    from cuda_agent.harness.suite_check import SuiteCheck, done_rows
    from cuda_agent.plugin_manager import PluginManager

    out = tmp_path / "check"
    config = load_config(EvalConfig, [_config(tmp_path)], [
        f"eval.tasks={json.dumps('folder:' + str(ROOT / 'examples' / 'tasks'))}", "backend=cpu", "eval.limit=2",
        "eval.progress=false"])
    SuiteCheck(config, out, PluginManager()).run()
    first, second = sorted(done_rows(out))
    state = out / "rows.jsonl"
    lines = [json.loads(line) for line in state.read_text().splitlines()]
    for row in lines:
        if row["task_id"] == first:
            row.update(status="too_large", reason="needs 90 GiB, 67 GiB available")
    state.write_text("".join(json.dumps(row) + "\n" for row in lines))
    SuiteCheck(config, out, PluginManager(), retry=True).run()  # errors only: nothing to do
    assert len(state.read_text().splitlines()) == 2 and done_rows(out)[first].status == "too_large"
    SuiteCheck(config, out, PluginManager(), retry_too_large=True).run()
    assert len(state.read_text().splitlines()) == 3 and done_rows(out)[first].status == "correct"
    SuiteCheck(config, out, PluginManager(), redo=[second.rsplit("/", 1)[-1]]).run()
    assert len(state.read_text().splitlines()) == 4 and done_rows(out)[second].status == "correct"
    assert [json.loads(line)["task_id"] for line in state.read_text().splitlines()][2:] == [first, second]


def test_tasks_start_one_level_after_another_in_turn() -> None:
    """Level 1 is mostly device time, level 3 mostly torch.compile's CPU time: a suite starts them in turn (each
    level's own order kept), so neither the host nor the device idles through a whole level."""
    from cuda_agent.harness.suite_check import interleave_levels
    from cuda_agent.schemas.task import TaskManifest

    def task(level: int | None, n: int) -> TaskManifest:
        return TaskManifest(id=f"kb/level{level}/{n}", name=str(n), code="", code_hash="h", level=level)

    tasks = [task(1, 1), task(1, 2), task(1, 3), task(2, 1), task(3, 1), task(3, 2), task(None, 9)]
    order = [t.id for t in interleave_levels(tasks)]
    assert order == ["kb/level1/1", "kb/level2/1", "kb/level3/1", "kb/levelNone/9", "kb/level1/2", "kb/level3/2",
                     "kb/level1/3"]
    assert sorted(order) == sorted(t.id for t in tasks) and interleave_levels([]) == []


def test_a_gpu_suite_check_gets_the_suites_defaults_for_what_the_user_left_unset() -> None:
    from cuda_agent.config import load_config
    from cuda_agent.harness.evaluation.config import EvalConfig
    from cuda_agent.plugins.commands.tasks import SUITE_DEFAULTS, with_suite_defaults

    def cfg(*overrides: str) -> EvalConfig:
        return load_config(EvalConfig, [], ['eval.tasks="folder:x"', *overrides])

    config, applied = with_suite_defaults(cfg("backend=cuda"), cpu_count=16)
    assert applied == SUITE_DEFAULTS and (config.eval.concurrency, config.eval.device_steps) == (8, 2)
    # what the user set stays; concurrency is capped at half the host's cores
    config, applied = with_suite_defaults(cfg("backend=cuda", "eval.device_steps=4"), cpu_count=6)
    assert applied == {"concurrency": 3} and (config.eval.concurrency, config.eval.device_steps) == (3, 4)
    config, applied = with_suite_defaults(cfg("backend=cuda", "eval.concurrency=2", "eval.device_steps=1"), 16)
    assert applied == {} and (config.eval.concurrency, config.eval.device_steps) == (2, 1)
    # the CPU backend times on the host's own cores: eval's defaults stay
    config, applied = with_suite_defaults(cfg("backend=cpu"), cpu_count=16)
    assert applied == {} and (config.eval.concurrency, config.eval.device_steps) == (4, 1)
