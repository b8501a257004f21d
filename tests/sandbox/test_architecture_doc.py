"""docs/architecture.md stays the map of the trusted side: its pictures are current and every harness module is in it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _diagrams():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("architecture_diagrams", ROOT / "scripts" / "architecture_diagrams.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_pictures_are_what_the_script_draws() -> None:
    d = _diagrams()
    assert (ROOT / "docs" / "architecture-components.svg").read_text() == d.components_svg() + "\n", \
        "run: python scripts/architecture_diagrams.py"
    assert (ROOT / "docs" / "architecture-verify.svg").read_text() == d.verify_svg() + "\n", \
        "run: python scripts/architecture_diagrams.py"


def test_every_module_of_the_trusted_side_is_on_the_map() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text() + (ROOT / "docs" / "sandbox-and-evaluator.md").read_text()
    parts = ["evaluator", "reference_pool", "candidate_pool", "sandbox", "transport", "session", "output_checks",
             "input_sets", "session_run", "timed_run", "fresh_sets", "phases", "grading", "sanitizer", "wire",
             "messages", "reference_messages", "reference_client", "runner_client", "reference", "reference_sets",
             "reference_checks", "reference_baselines", "candidate_runner", "runner_io", "settings", "experiments",
             "timing_protocol", "timing", "timing_stats", "profiling", "baselines", "process_tree"]
    missing = [p for p in parts if (ROOT / "harness" / f"{p}.py").exists() and f"{p}.py" not in doc and f"`{p}`" not in doc]
    assert not missing, f"docs/architecture.md does not place: {missing}"
    assert all((ROOT / "harness" / f"{p}.py").exists() for p in parts)
