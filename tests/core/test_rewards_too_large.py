"""A task too large for the device earns no reward, under either built-in reward (issue 21)."""

from __future__ import annotations

from cuda_agent.plugins.rewards.milestone import MilestoneConfig, MilestoneReward
from cuda_agent.plugins.rewards.speedup import SpeedupReward
from cuda_agent.schemas.result import CandidateResult, Status


def _result(status: Status, **kw) -> CandidateResult:
    return CandidateResult(task_id="kernelbench/level1/19_ReLU", phase="grade", status=status, **kw)


def test_too_large_is_neither_punished_nor_rewarded() -> None:
    too_large = _result(Status.too_large, message="needs 150.0 GiB but only 118.0 GiB can be reserved")
    assert MilestoneReward().score(too_large) == 0.0
    assert SpeedupReward().score(too_large) == 0.0
    assert MilestoneReward(MilestoneConfig(too_large=-0.5)).score(too_large) == -0.5
    # an error stays an error: it is the candidate's (or the harness's) failure, not the task's size
    assert MilestoneReward().score(_result(Status.error)) == -1.0
    assert MilestoneReward().score(_result(Status.correct, speedup_eager=1.2, speedup_compile=0.9)) == 2.0
