"""Records of interfaces 1.x (free-form ``CandidateResult.extra``) still open under 2.0 (typed ``diagnostics``).

The fixtures under ``data/interfaces_v1`` were written by the code of commit 9149e7d (interfaces 1.0): a
``cuda-agent run`` folder and a ``cuda-agent eval`` folder (text files only), both on the CPU backend.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cuda_agent import INTERFACES_VERSION
from cuda_agent.schemas.result import CandidateResult, Diagnostics

DATA = Path(__file__).parent / "data" / "interfaces_v1"
REPO = Path(__file__).resolve().parents[2]


def test_a_version_1_result_maps_its_extra_onto_the_typed_diagnostics() -> None:
    graded = json.loads((DATA / "run" / "result.json").read_text())["graded"]
    assert graded["schema_version"] == "1.0" and "extra" in graded and "diagnostics" not in graded
    result = CandidateResult.model_validate(graded)
    d = result.diagnostics
    assert result.schema_version == "1.0"  # the record says what it was written as
    assert d.phase_s["forward_calls"] > 0 and d.grade_rounds == 3 and d.spot_checks == 12
    assert d.input_sets is not None and d.input_sets.seeded == 9 and d.transport == "host"
    assert d.fresh_sets is not None and d.fresh_sets.calls == 4 and d.fresh_sets.reported == "all"
    assert d.build_s is not None and d.legacy == {}
    dumped = result.model_dump(mode="json")
    assert "extra" not in dumped and dumped["diagnostics"]["grade_rounds"] == 3
    assert CandidateResult.model_validate(dumped) == result  # and it reads back as 2.0 data
    assert INTERFACES_VERSION == "3.7" and CandidateResult(task_id="t", phase="verify", status="correct").schema_version == "3.7"


def test_keys_no_field_knows_are_kept_aside_and_a_bad_value_does_not_stop_the_record() -> None:
    d = Diagnostics.from_extra({"spot_checks": 3, "ncu_summary": {"dram": 0.8}, "grade_rounds": "three"})
    assert d.spot_checks == 3 and d.legacy == {"ncu_summary": {"dram": 0.8}, "grade_rounds": "three"}


def test_show_opens_a_version_1_run_folder(capsys) -> None:  # type: ignore[no-untyped-def]
    from cuda_agent.cli import main

    assert main(["show", str(DATA / "run")]) == 0
    out = capsys.readouterr().out
    assert "correct" in out and "swish" in out


def test_report_and_resume_open_a_version_1_eval_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``cuda-agent report`` renders the folder, and what resume reads of each episode (done or not, its records,
    its summary) parses: the episode counts as done and is not run again. (Whether a resume is allowed at all is
    the saved config's business, compared field by field by ``harness/evaluation/resume.py``.)"""
    from cuda_agent.cli import main
    from cuda_agent.harness.evaluation.records import read_end_record, read_eval_record, summarize_episode
    from cuda_agent.harness.evaluation.resume import is_done

    folder = tmp_path / "eval"
    shutil.copytree(DATA / "eval", folder)
    assert main(["report", str(folder)]) == 0
    assert (folder / "report" / "report.json").is_file() and (folder / "report" / "report.md").is_file()
    episode = folder / "episodes" / "file--swish__seed0"
    assert is_done(episode)
    end, record = read_end_record(episode), read_eval_record(episode)
    assert end is not None and end.graded is not None and end.graded.diagnostics.grade_rounds == 3
    assert record is not None and all(r.diagnostics.phase_s for r in record.regrades.values())
    summary = summarize_episode(episode)
    assert summary.events and summary.selections and summary.runner_error is None
