"""Stage logs: a torn last line (kill during a write) is cut; done ids are remembered."""

from __future__ import annotations

import argparse
from pathlib import Path

from cuda_agent.training.synthesis.cli import register_command
from cuda_agent.training.synthesis.jsonl_log import JsonlLog


def test_torn_last_line_is_cut_and_appending_continues(tmp_path: Path):
    path = tmp_path / "stage.jsonl"
    log = JsonlLog(path)
    log.append({"id": "a", "v": 1})
    log.append({"id": "b", "v": 2})
    with open(path, "a") as f:
        f.write('{"id": "c", "v"')  # killed mid-write
    again = JsonlLog(path)
    assert set(again.records) == {"a", "b"} and "c" not in again
    again.append({"id": "c", "v": 3})
    assert [line[:9] for line in path.read_text().splitlines()] == ['{"id": "a', '{"id": "b', '{"id": "c']
    assert JsonlLog(path).records["c"]["v"] == 3


def test_data_command_parses_every_stage():
    parser = argparse.ArgumentParser()
    register_command(parser.add_subparsers(dest="command"))
    for stage in ("mine", "compose", "filter", "dedup", "build"):
        args = parser.parse_args(["data", stage, "-c", "a.yaml", "-c", "b.yaml", "-o", "seed=3"])
        assert args.data_command == stage and args.config == ["a.yaml", "b.yaml"] and args.override == ["seed=3"]
        assert callable(args.func)


def test_bad_config_is_reported_not_raised(tmp_path: Path, capsys):
    parser = argparse.ArgumentParser()
    register_command(parser.add_subparsers(dest="command"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("target_taskz: 3\n")
    args = parser.parse_args(["data", "dedup", "-c", str(bad)])
    assert args.func(args) == 2
    assert "target_tasks" in capsys.readouterr().out  # the error names the valid key
