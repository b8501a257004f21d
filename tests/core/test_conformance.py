"""cuda_agent.testing: the conformance kit passes every built-in and catches broken components."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from cuda_agent.plugin_manager import PluginManager
from cuda_agent.protocols import ToolOutput
from cuda_agent.testing import ConformanceError, check_backend, check_reward, check_tool, milestone_ladder


@pytest.fixture(scope="module")
def builtin_pm() -> PluginManager:
    return PluginManager(load_entrypoints=False)


def test_every_builtin_tool_conforms(builtin_pm):
    names = builtin_pm.registry.names("tool")
    assert {"read_file", "write_file", "edit_file", "list_files", "finish"} <= set(names)
    for name in names:
        check_tool(builtin_pm.registry.build("tool", name))


def test_file_tool_trial_runs():
    from cuda_agent.plugins.tools.files import EditFileTool, ReadFileTool

    out = check_tool(ReadFileTool, example_args={"path": "model.py"})
    assert "class Model" in out.content
    out = check_tool(EditFileTool, example_args={"path": "a.txt", "old": "x", "new": "y"}, files={"a.txt": "x"})
    assert not out.is_error
    out = check_tool(EditFileTool, example_args={"path": "model.py", "old": "class", "new": "y"})
    assert out.is_error and "protected" in out.content


def test_every_builtin_reward_conforms(builtin_pm):
    for name in builtin_pm.registry.names("reward"):
        check_reward(builtin_pm.registry.build("reward", name))
    check_reward(builtin_pm.registry.build("reward", "speedup", {"mode": "log", "baseline": "eager"}))


def test_milestone_values_on_the_ladder(builtin_pm):
    reward = builtin_pm.registry.build("reward", "milestone")
    assert [reward.score(r) for r in milestone_ladder().values()] == [-1.0, 1.0, 2.0, 3.0]


class _Flat:
    def score(self, graded, turn_results=()):
        return 1.0


class _NaN:
    def score(self, graded, turn_results=()):
        return float("nan")


def test_broken_rewards_are_caught():
    with pytest.raises(ConformanceError, match="not monotone"):
        check_reward(_Flat())
    with pytest.raises(ConformanceError, match="not a finite number"):
        check_reward(_NaN())


class _UndocumentedArgs(BaseModel):
    x: int


class _RaisingTool:
    name = "raiser"
    description = "raises"
    Args = _UndocumentedArgs

    def run(self, args, ctx):
        raise ValueError("bad")


class _NoDescription:
    name = "nodesc"
    description = ""
    Args = _UndocumentedArgs

    def run(self, args, ctx):
        return ToolOutput(content="")


def test_broken_tools_are_caught():
    with pytest.raises(ConformanceError, match=r"(?s)no description.*run raised ValueError"):
        check_tool(_RaisingTool, example_args={"x": 1})
    with pytest.raises(ConformanceError, match="description must be a non-empty string"):
        check_tool(_NoDescription)


def test_toy_backend_conforms(task, toy_module, tmp_path):
    result = check_backend(toy_module.ToyBackend(), task, solution={"model_new.py": "class ModelNew: pass\n"})
    assert result.status.value == "correct"
    with pytest.raises(ConformanceError, match="compile of the honest solution failed"):
        check_backend(toy_module.ToyBackend(), task, solution={"model_new.py": "nothing here\n"})


def _honest(kind: str, name: str) -> dict[str, str]:
    from pathlib import Path

    sol = Path(__file__).resolve().parents[2] / "examples" / "solutions" / kind / name
    return {p.relative_to(sol).as_posix(): p.read_text() for p in sol.rglob("*") if p.is_file()}


def _example_task(name: str):
    from pathlib import Path

    from cuda_agent.schemas.task import TaskManifest

    path = Path(__file__).resolve().parents[2] / "examples" / "tasks" / f"{name}.py"
    return TaskManifest.from_code(f"examples/{name}", path.read_text())


@pytest.mark.slow
def test_cpu_backend_conforms(builtin_pm):
    backend = builtin_pm.registry.build("backend", "cpu")
    result = check_backend(backend, _example_task("swish"), solution=_honest("cpu", "swish"))
    assert result.status.value == "correct"


@pytest.mark.gpu
@pytest.mark.slow
def test_cuda_backend_conforms(builtin_pm):
    backend = builtin_pm.registry.build("backend", "cuda")
    result = check_backend(backend, _example_task("swish"), solution=_honest("cuda", "swish"))
    assert result.status.value == "correct"
