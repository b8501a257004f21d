"""Where a candidate runner's start goes: the ``ready`` reply's phases, and their medians in a run's diagnostics.

On the H200 host a runner took 10-25 s from spawn to ready and ~12 CPU seconds, and waiting for runners was the
largest part of an episode's device time; nothing said which part of the start cost. Real runners (device cpu)
here: the reply carries each phase's wall and CPU seconds, the phases account for the whole start, and an
episode's ``usage.json`` and the learning-curve diagnostics give their medians.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cuda_agent.harness.candidate_pool import CandidatePool
from cuda_agent.harness.evaluation.scheduling import EpisodeUsage
from cuda_agent.harness.sandbox import RunnerOptions
from cuda_agent.schemas.result import Diagnostics, StartPhase

#: The runner's start, phase by phase, in the order it reports them.
PHASES = ["interpreter", "setup", "imports", "device_init", "cpu_warmup", "loader_prepare", "device_timer",
          "audit_warmup", "guard_snapshot"]
#: Each phase's seconds are rounded to 0.1 ms in the reply, the start to 1 ms.
ROUNDING_S = 0.005


def _start_runners(scratch: Path, n: int) -> list[Diagnostics]:
    """Start ``n`` real runners one after another; each one's start as a session records it (session_run)."""
    pool = CandidatePool(RunnerOptions(device="cpu", cpu_threads=1, scratch_dir=scratch), 0)
    starts = []
    try:
        for _ in range(n):
            proc = pool.acquire()
            starts.append(Diagnostics(runner_start_s=proc.start_s, runner_start_phases=proc.start_phases,
                                      runner_start_cpu_s=proc.start_cpu_s))
            pool.release(proc)
    finally:
        pool.close()
    return starts


@pytest.fixture(scope="module")
def starts(tmp_path_factory: pytest.TempPathFactory) -> list[Diagnostics]:
    return _start_runners(tmp_path_factory.mktemp("runners"), 3)


@pytest.mark.slow
def test_the_ready_reply_says_where_the_start_went(starts: list[Diagnostics]) -> None:
    for d in starts:
        assert list(d.runner_start_phases) == PHASES
        assert all(p.wall_s >= 0 and p.cpu_s >= 0 for p in d.runner_start_phases.values())
        wall = sum(p.wall_s for p in d.runner_start_phases.values())
        cpu = sum(p.cpu_s for p in d.runner_start_phases.values())
        # spawn to ready, phase by phase: together they are the start the parent measured
        assert d.runner_start_s is not None and 0.9 * d.runner_start_s <= wall <= d.runner_start_s + ROUNDING_S
        assert d.runner_start_cpu_s is not None and 0 < cpu <= d.runner_start_cpu_s + ROUNDING_S
        assert d.runner_start_phases["imports"].cpu_s > 0  # torch's import: never free


@pytest.mark.slow
def test_an_episodes_usage_and_the_run_diagnostics_give_medians_of_real_starts(
    starts: list[Diagnostics], tmp_path: Path
) -> None:
    from cuda_agent.schemas.trajectory import EndRecord, HeaderRecord, append_record
    from cuda_agent.training.stages.kernel_rollouts import _write_usage

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _learning_curve_report import diagnostics

    usage = EpisodeUsage()
    for d in starts:
        usage.add_runner_start(d)
    usage.add_runner_start(Diagnostics())  # a step that started no runner (a build failure) adds nothing
    episode = tmp_path / "sft_seed0" / "0_sft" / "heldout" / "final" / "000_00"
    episode.mkdir(parents=True)
    with (episode / "trajectory.jsonl").open("w") as fh:
        append_record(fh, HeaderRecord(run_id="r", task_id="t0", task_code_hash="h", policy="hf", backend="cpu",
                                       system_prompt="s", task_prompt="p", started_at="2026-12-03T00:00:00Z"))
        append_record(fh, EndRecord(exit="submitted", turns=0, reward=0.0, wall_s=1.0))
    _write_usage(episode, usage, 1.0)
    assert len(json.loads((episode / "usage.json").read_text())["runner_start_phases"]) == 3

    info = diagnostics(tmp_path, [0])["sft_seed0"]["episodes"]["0_sft/heldout/final"]
    cpus = sorted(round(d.runner_start_cpu_s, 2) for d in starts)
    assert info["runner_start_cpu_s"] == {"n": 3, "median": cpus[1], "max": cpus[2]}
    phases = info["runner_start_phases"]
    assert list(phases) == PHASES
    for name in PHASES:
        walls = sorted(round(d.runner_start_phases[name].wall_s, 3) for d in starts)
        cpu = sorted(round(d.runner_start_phases[name].cpu_s, 3) for d in starts)
        assert phases[name] == {"wall_median": walls[1], "cpu_median": cpu[1]}


def test_a_ready_reply_of_an_older_runner_has_no_phases() -> None:
    """The new fields are optional: a reply without them reads as no breakdown."""
    from cuda_agent.harness import messages as m

    ready = m.Ready(pid=1, threads=1, spin={})
    assert ready.start_phases == {} and ready.start_cpu_s is None
    assert m.Ready(pid=1, threads=1, spin={}, start_phases={"setup": {"wall_s": 0.1, "cpu_s": 0.0}}).start_phases == {
        "setup": StartPhase(wall_s=0.1, cpu_s=0.0)}
