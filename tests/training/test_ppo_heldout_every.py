"""``heldout_every``: a PPO stage of several steps evaluates its held-out tasks every k-th step and at its end."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cuda_agent.training.settings import PPOStageConfig
from cuda_agent.training.stages.ppo import heldout_due


def test_every_kth_step_and_the_step_that_ends_the_stage_are_evaluated() -> None:
    assert [s for s in range(1, 8) if heldout_due(s, 7, 3, False)] == [3, 6, 7]
    assert [s for s in range(1, 4) if heldout_due(s, 3, 1, False)] == [1, 2, 3]  # the default: after every step
    assert [s for s in range(1, 4) if heldout_due(s, 3, 3, False)] == [3]  # a run of 3 steps: once, at its end
    assert heldout_due(2, 5, 4, True)  # target_pass_rate ends the stage at step 2: it ends evaluated


def test_heldout_every_defaults_to_every_step_and_refuses_zero() -> None:
    assert PPOStageConfig().heldout_every == 1
    with pytest.raises(ValidationError, match="heldout_every"):
        PPOStageConfig(heldout_every=0)
