"""A held-out evaluation cut by its admission deadline is written as partial, for a resumed run to finish."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from cuda_agent.schemas.trajectory import EndRecord, HeaderRecord, TurnRecord, append_record
from cuda_agent.training.stages.heldout import run_heldout
from cuda_agent.training.stages.kernel_rollouts import CollectionStats


def _episode(d: Path, ended: bool) -> None:
    d.mkdir(parents=True)
    with (d / "trajectory.jsonl").open("w") as fh:
        append_record(fh, HeaderRecord(run_id="r", task_id=d.name, task_code_hash="h", policy="hf", backend="cpu",
                                       system_prompt="s", task_prompt="p", started_at="2026-12-03T00:00:00Z"))
        append_record(fh, TurnRecord(turn=1, text="write", timings={"policy_s": 1.0, "tools_s": 1.0}))
        if ended:
            append_record(fh, EndRecord(exit="max_turns", turns=1, reward=-1.0, wall_s=3.0))


class _Source:
    """An episode source whose evaluation ran two episodes (one ended, one cut) and never started a third."""

    rt = SimpleNamespace(config=SimpleNamespace(backend="cpu"))

    def __init__(self, not_admitted: int) -> None:
        self.not_admitted = not_admitted

    def evaluate(self, model_dir, tasks, folder, repeats=1, temperature=None, seed=0):  # noqa: ANN001
        dirs = [folder / f"{k:03d}_00" for k in range(3)]
        _episode(dirs[0], ended=True)
        _episode(dirs[1], ended=self.not_admitted == 0)
        if not self.not_admitted:
            _episode(dirs[2], ended=True)
        return dirs, CollectionStats(episodes=3, not_admitted=self.not_admitted)


TASKS = [str(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "swish.py")]  # probed by the real loader


def test_an_evaluation_with_unstarted_episodes_writes_no_final_records(tmp_path: Path) -> None:
    summary = run_heldout(_Source(not_admitted=1), tmp_path / "model", TASKS, tmp_path / "heldout",
                          "final")
    assert not (tmp_path / "heldout" / "final.jsonl").exists()  # the resumed run reads the folder instead
    assert summary["heldout_not_admitted"] == 1.0 and summary["heldout_episodes"] == 1.0  # the ended one only


def test_a_whole_evaluation_writes_its_records(tmp_path: Path) -> None:
    summary = run_heldout(_Source(not_admitted=0), tmp_path / "model", TASKS, tmp_path / "heldout",
                          "final")
    lines = (tmp_path / "heldout" / "final.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x)["exit"] == "max_turns" for x in lines)
    assert summary["heldout_not_admitted"] == 0.0


def test_a_record_says_whether_the_episode_wrote_its_model_new(tmp_path: Path) -> None:
    """``model_new_written``: False for the layout's own starter (what an episode that never wrote ModelNew leaves,
    on either backend), True once the file changed, None without a workspace."""
    from cuda_agent.harness.layout import write_layout
    from cuda_agent.training.stages.episodes import load_tasks
    from cuda_agent.training.stages.heldout import model_new_written

    task = load_tasks(TASKS, "cpu")[0]
    for kind in ("cuda", "cpu"):
        ws = tmp_path / kind
        write_layout(ws, task, kind)
        assert model_new_written(ws) is False
        (ws / "model_new.py").write_text((ws / "model_new.py").read_text().replace(
            'raise NotImplementedError("ModelNew.forward is not written yet")', "return cuda_extension.swish(x)"))
        assert model_new_written(ws) is True
    assert model_new_written(tmp_path / "absent") is None


def test_a_record_keeps_the_grade_message_only_when_the_harness_could_not_grade(tmp_path: Path) -> None:
    """A grade that ended in ``error`` (or timeout, too_large) keeps its message in the record, so a harness-side
    failure can be told apart from a bad candidate in the returned records; an incorrect grade keeps none."""
    from cuda_agent.schemas.result import CandidateResult, Status
    from cuda_agent.training.stages.heldout import GRADE_MESSAGE_LIMIT, episode_record

    for name, status in (("err", Status.error), ("bad", Status.incorrect)):
        d = tmp_path / name
        d.mkdir()
        graded = CandidateResult(task_id="t", phase="grade", status=status, message="runner died: " + "x" * 2000)
        with (d / "trajectory.jsonl").open("w") as fh:
            append_record(fh, HeaderRecord(run_id="r", task_id="t", task_code_hash="h", policy="hf", backend="cpu",
                                           system_prompt="s", task_prompt="p", started_at="2026-12-03T00:00:00Z"))
            append_record(fh, EndRecord(exit="max_turns", turns=0, reward=-1.0, wall_s=1.0, graded=graded))
    err, bad = episode_record(tmp_path / "err"), episode_record(tmp_path / "bad")
    assert err["status"] == "error" and err["grade_message"].startswith("runner died: ")
    assert len(err["grade_message"]) == GRADE_MESSAGE_LIMIT
    assert bad["status"] == "incorrect" and "grade_message" not in bad


def test_a_broken_model_new_is_malformed_and_a_cheat_is_a_hack(tmp_path: Path) -> None:
    """The hack rate counts attempted hacks, not garbled text: a ``model_new.py`` that cannot be parsed is rejected
    (``T1.python.no_model_new``, from the real checker) and counts in ``malformed_rate``; one that imports a module
    outside the allowlist is a hack. Records written before the split (``hack`` True on every rejection) are
    re-classified from their rule by the summary and the paired comparison."""
    from cuda_agent.harness.integrity import check_sources
    from cuda_agent.schemas.result import CandidateResult, Status
    from cuda_agent.training.kernel_family.curve_stats import metric
    from cuda_agent.training.stages.heldout import episode_record, summarize

    sources = {"garbled": "import torch\nclass ModelNew(nn.Module:\n    def forward(self, x):\n",
               "cheat": "import torch\nimport numpy as np\nclass ModelNew(torch.nn.Module):\n"
                        "    def forward(self, x):\n        return torch.from_numpy(np.maximum(x.numpy(), 0))\n"}
    recs = {}
    for name, text in sources.items():
        ws = tmp_path / name / "ws"
        ws.mkdir(parents=True)
        (ws / "model_new.py").write_text(text)
        rule = check_sources(ws, kind="cpu")[0].rule
        graded = CandidateResult(task_id="t", phase="grade", status=Status.rejected, rule=rule, message="rejected")
        with (tmp_path / name / "trajectory.jsonl").open("w") as fh:
            append_record(fh, HeaderRecord(run_id="r", task_id=name, task_code_hash="h", policy="hf", backend="cpu",
                                           system_prompt="s", task_prompt="p", started_at="2026-12-03T00:00:00Z"))
            append_record(fh, EndRecord(exit="submitted", turns=0, reward=-1.0, wall_s=1.0, graded=graded))
        recs[name] = episode_record(tmp_path / name)
    assert recs["garbled"]["rule"] == "T1.python.no_model_new" and recs["garbled"]["hack"] is False
    assert recs["cheat"]["rule"] == "T1.python.import_not_allowed" and recs["cheat"]["hack"] is True
    old = dict(recs["garbled"], hack=True)  # as written before the split
    s = summarize([recs["cheat"], old])
    assert s["hack_rate"] == 0.5 and s["malformed_rate"] == 0.5
    assert metric("hack")(old) == 0.0 and metric("hack")(recs["cheat"]) == 1.0
