"""``tasks check --timing-preset standard_fast`` end to end on the CPU backend: each row records its grading pass's
rounds and why they ended, and ``benchmarks/grading_stop_replay.py`` replays the stop on those rows (issue 21)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_tasks_check_with_standard_fast_records_its_rounds_and_replays(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    from cuda_agent.cli import main

    cfg = tmp_path / "check.yaml"  # the preset named here is replaced by the flag's
    cfg.write_text("plugins:\n  cpu:\n    harness:\n      verify: {input_sets: 2}\n"
                   f"      timing: {{preset: quick, compile_baseline: false, baseline_cache_dir: {tmp_path / 'bl'}}}\n")
    out = tmp_path / "check"
    assert main(["tasks", "check", f"folder:{ROOT / 'examples' / 'tasks'}", "--backend", "cpu", "--out", str(out),
                 "--limit", "1", "--timing-preset", "standard_fast", "-c", str(cfg), "-o", "eval.progress=false"]) == 0
    row = json.loads((out / "rows.jsonl").read_text().splitlines()[0])
    rounds = row["grade_rounds"]
    assert rounds["max"] == 9 and 3 <= rounds["run"] <= 9, rounds  # standard_fast, not the config's quick (1)
    assert rounds["stop"].split(":")[0] in ("precise", "max_rounds") and (rounds["stop"].startswith("precise")
                                                                       or rounds["run"] == 9), rounds
    # rounds of 11 calls (no compile baseline here), and one more where the fresh-set rule asked for its confirming
    # look (a round of the same form: on a loaded host fresh calls can run slower than the pass's median)
    confirmed = bool((row.get("fresh_sets") or {}).get("first_look"))
    assert rounds["calls"]["eager"] == [11] * (rounds["run"] + confirmed), (rounds, row.get("fresh_sets"))
    assert sum(rounds["calls"]["eager"]) == len(row["samples_ms"]["eager"])
    summary = json.loads((out / "report.json").read_text())["summary"]["grade_rounds"]
    assert summary["rows"] == 1 and summary["rounds_run"] == {str(rounds["run"]): 1}
    assert summary["stopped_early"] == int(rounds["run"] < 9)
    assert "grading passes the precision stop ended early" in (out / "report.md").read_text()
    logged = capsys.readouterr()
    events = [json.loads(line) for line in (logged.out + logged.err).splitlines() if line.startswith("{")]
    stages = [e["stage"] for e in events if e.get("event") == "self-check stage" and e.get("task") == row["task_id"]]
    assert "self-check started" in [e.get("event") for e in events]  # a run killed at its cap shows where it was
    assert stages[:1] == ["probe"] and stages[-1] == "device", stages

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import grading_stop_replay as replay
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    res = replay.main(["--rows", str(out / "rows.jsonl"), "--out", str(tmp_path / "replay.json")])
    s = res["summary"]
    assert s["rows_replayed"] + sum(s["rows_skipped"].values()) == 1
    if s["rows_replayed"]:  # replayed against its own rounds (the fresh-set rule may have replaced its samples)
        (r,) = res["rows"]
        assert r["rounds"] == rounds["run"] and 3 <= r["ran"] <= r["rounds"]
    assert json.loads((tmp_path / "replay.json").read_text())["config"]["calls_per_round"] == 11
