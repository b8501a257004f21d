"""The bundled honest example solutions (examples/solutions/<backend>/<task>) pass every static rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_sources

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "solutions"
WORKSPACES = sorted(p for p in EXAMPLES.glob("*/*") if (p / "model_new.py").is_file()) if EXAMPLES.is_dir() else []


@pytest.mark.skipif(not WORKSPACES, reason="examples/solutions is not present")
@pytest.mark.parametrize("workspace", WORKSPACES, ids=[f"{p.parent.name}/{p.name}" for p in WORKSPACES])
def test_example_solution_passes_static_checks(workspace: Path) -> None:
    violations = check_sources(workspace, workspace.parent.name)
    assert violations == [], "\n".join(str(v) for v in violations)
