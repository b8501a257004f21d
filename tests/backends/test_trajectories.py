"""The bundled scripted trajectories write exactly the honest solutions, then compile/verify/profile/finish."""

from __future__ import annotations

import pytest

from cuda_agent.scripted_policy import load_script

from .conftest import EXAMPLE_TASKS, REPO, SOLUTIONS


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
@pytest.mark.parametrize("name", EXAMPLE_TASKS)
def test_trajectory_replays_the_honest_solution(name, kind):
    actions = load_script(REPO / "examples" / "trajectories" / f"{name}_{kind}.yaml")
    calls = [c for a in actions for c in a.tool_calls]
    writes = {c.arguments["path"]: c.arguments["content"] for c in calls if c.name == "write_file"}
    sol = SOLUTIONS / kind / name
    expected = {str(p.relative_to(sol)): p.read_text() for p in sol.rglob("*") if p.is_file()}
    assert writes == expected, "regenerate the trajectory after editing the solution"
    order = [c.name for c in calls if c.name != "write_file"]
    assert order == ["read_file", "compile", "verify", "profile", "finish"]
