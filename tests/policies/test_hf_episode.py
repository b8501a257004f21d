"""An hf-policy episode through the real agent loop: the trajectory's token layout is what the model saw."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest

TASK_CODE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
"""


class NoBuildBackend:
    """A real (if minimal) Backend over a ConfinedWorkspace that grades every state 'incorrect'.

    The tiny random model never writes a kernel, so nothing needs compiling;
    the loop, tools, trajectory and grading path all run for real.
    """

    name = "nobuild"
    skill = "cpu"
    kernel_suffix = ".cpp"

    def availability(self):
        return True, "always"

    def device_facts(self):
        return {"device": "none"}

    def prepare_workspace(self, task, root):
        from cuda_agent.harness.workspace import ConfinedWorkspace

        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        (root / "model.py").write_text(task.code)
        (root / "model_new.py").write_text("# ModelNew goes here\n")
        return ConfinedWorkspace(root, protected=["model.py"])

    def _result(self, task, phase):
        return CandidateResult(task_id=task.id, phase=phase, status=Status.incorrect, message="no kernel")

    def compile(self, workspace, task):
        return self._result(task, "compile")

    def verify(self, workspace, task):
        return self._result(task, "verify")

    def profile(self, workspace, task):
        return self._result(task, "profile")

    def grade(self, workspace, task):
        return self._result(task, "grade")

    def close(self):
        pass


class NoBuildPlugin:
    """Registers backend 'nobuild'."""

    @hookimpl
    def register_backends(self, register) -> None:
        register("nobuild", NoBuildBackend)


@pytest.mark.slow
def test_trajectory_token_layout_reproduces_the_ids_the_model_saw(tiny_lm_dir: Path, tmp_path: Path) -> None:
    import torch

    from cuda_agent.components import build_policy
    from cuda_agent.config import RunConfig
    from cuda_agent.loop import run_episode
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.schemas.trajectory import episode_token_layout, load_trajectory
    from cuda_agent.training.logprobs import token_logprobs

    config = RunConfig.model_validate({
        "policy": f"hf:{tiny_lm_dir}?max_new_tokens=24&seed=5",
        "backend": "nobuild",
        "tools": ["list_files", "read_file", "finish"],
        "agent": {"max_turns": 3},
    })
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("nobuild", NoBuildPlugin())])
    policy = build_policy(config, pm)
    task = TaskManifest.from_code("tests/relu", TASK_CODE)
    end = run_episode(task, config=config, plugin_manager=pm, out_dir=tmp_path / "run", policy=policy)
    assert end.turns == 3 and end.exit == "max_turns"

    traj = load_trajectory(tmp_path / "run" / "trajectory.jsonl")
    assert traj.complete and traj.header.system_prompt_ids == []
    ids, mask, logps = episode_token_layout(traj.header, traj.turns)
    assert ids == policy.context_ids  # exactly the ids the model saw, in order
    assert sum(mask) == sum(len(t.tokens.output_ids) for t in traj.turns)
    # the first delta is the rendered system prompt + task + tools with the generation prompt
    first = policy.tokenizer.decode(traj.turns[0].tokens.prompt_delta_ids, skip_special_tokens=False)
    assert first.startswith("<|im_start|>system\n") and traj.header.task_prompt in first
    assert first.endswith("<|im_start|>assistant\n")
    # later deltas hold the observations as shown (format errors: the model never calls a tool)
    second = policy.tokenizer.decode(traj.turns[1].tokens.prompt_delta_ids, skip_special_tokens=False)
    assert traj.turns[0].observations[0].content in second
    # rollout log-probs equal the trainer's recomputation on the masked positions
    with torch.no_grad():
        recomputed = token_logprobs(policy.engine.model, torch.tensor([ids]))[0]
    for i in range(1, len(ids)):
        if mask[i]:
            assert abs(recomputed[i - 1].item() - logps[i]) < 1e-5
