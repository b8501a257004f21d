"""Helpers of the KernelBench tests: the vendored problems, the honest solutions, ``cuda-agent score`` in-process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "kernelbench" / "data"
SOLUTIONS = REPO / "examples" / "solutions" / "kernelbench"
PINNED = next(line.split("=", 1)[1] for line in (REPO / "scripts" / "kernelbench.lock").read_text().splitlines()
              if line.startswith("commit="))
CONVENTIONS = ("registry", "release", "single_file")
#: The five vendored problems by their ids.
PROBLEM_IDS = ("kernelbench/level1/1_Square_matrix_multiplication_", "kernelbench/level1/19_ReLU",
               "kernelbench/level1/23_Softmax", "kernelbench/level2/12_Gemm_Multiply_LeakyReLU",
               "kernelbench/level3/1_MLP")


def solution_kit():  # type: ignore[no-untyped-def]
    """The ``kernels`` and ``conventions`` modules of examples/solutions/kernelbench."""
    sys.path.insert(0, str(SOLUTIONS))
    import conventions  # type: ignore[import-not-found]
    import kernels  # type: ignore[import-not-found]

    return kernels, conventions


@pytest.fixture
def score(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``run(solutions, tasks_spec, backend, out, *extra) -> (rc, report)``: ``cuda-agent score`` with small settings."""
    from cuda_agent.cli import main

    def run(solutions: Path, tasks: str, backend: str, out: Path, *extra: str) -> tuple[int, dict]:
        cfg = tmp_path / "score.yaml"
        cfg.write_text(
            f"plugins:\n  {backend}:\n    harness:\n      verify: {{input_sets: 2}}\n"
            f"      timing: {{preset: quick, compile_baseline: false, baseline_cache_dir: {tmp_path / 'bl'}}}\n"
        )
        rc = main(["score", str(solutions), "--tasks", tasks, "--backend", backend, "--out", str(out), "-c", str(cfg),
                   *extra])
        report = json.loads((out / "report.json").read_text()) if (out / "report.json").is_file() else {}
        return rc, report

    return run
