"""Episodes -> padded tensors in the action layout; episodes from trajectory files."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.trajectory import EndRecord, HeaderRecord, TurnRecord, TurnTokens
from cuda_agent.training.buffers import Episode, collate, episode_from_trajectory


def test_collate_shifts_to_action_layout_and_pads():
    a = Episode([1, 2, 7, 8], [0, 0, 1, 1], [0, 0, -0.5, -0.25], reward=1.0, success=True, turns=1)
    b = Episode([1, 9], [0, 1], [0, -1.0], reward=-1.0, turns=1)
    batch = collate([a, b], pad_id=0)
    assert batch.input_ids.tolist() == [[1, 2, 7, 8], [1, 9, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch.mask.tolist() == [[0, 1, 1], [1, 0, 0]]
    assert batch.rollout_logp.tolist() == [[0, -0.5, -0.25], [-1.0, 0, 0]]
    assert batch.rewards.tolist() == [1.0, -1.0] and batch.success.tolist() == [True, False]
    sub = batch.select([1])
    assert sub.input_ids.tolist() == [[1, 9]] and sub.mask.tolist() == [[1]]


def test_episode_arrays_must_align():
    with pytest.raises(ValueError, match="token layout"):
        Episode([1, 2], [0], [0.0, 0.0], reward=0.0)


def test_episode_from_trajectory_masks_observations(tmp_path):
    header = HeaderRecord(run_id="r", task_id="t", task_code_hash="sha256:x", policy="hf:m", backend="cpu",
                          system_prompt="s", task_prompt="p", system_prompt_ids=[1, 2, 3], started_at="now")
    t1 = TurnRecord(turn=1, text="a", tokens=TurnTokens(prompt_delta_ids=[], output_ids=[10, 11], output_logprobs=[-0.1, -0.2]))
    t2 = TurnRecord(turn=2, text="b", tokens=TurnTokens(prompt_delta_ids=[20, 21, 22], output_ids=[12], output_logprobs=[-0.3]))
    graded = CandidateResult(task_id="t", phase="grade", status=Status.correct)
    end = EndRecord(exit="submitted", turns=2, graded=graded, reward=2.0, reward_name="milestone")
    path = tmp_path / "trajectory.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in (header, t1, t2, end)))
    ep = episode_from_trajectory(path)
    assert ep.token_ids == [1, 2, 3, 10, 11, 20, 21, 22, 12]
    assert ep.loss_mask == [0, 0, 0, 1, 1, 0, 0, 0, 1]
    assert ep.logprobs == [0, 0, 0, -0.1, -0.2, 0, 0, 0, -0.3]
    assert ep.reward == 2.0 and ep.success and ep.turns == 2
    b = collate([ep])
    assert torch.equal(b.mask, torch.tensor([[0, 0, 1, 1, 0, 0, 0, 1]], dtype=torch.float32))
