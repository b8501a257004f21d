"""Session 42's red team against the runtime side (CPU backend, ``cuda-agent score``, reduced KernelBench sizes, real
builds and runners), after session 41's widened recalls among the timed calls. Kernels in
``tests/integrity/cheats/runtime_s42/kernels.py``, written in the registry convention (the comparison and the timing
do not depend on the convention).

- **A content cache switched on once the fresh calls are behind it** (T12/T13): right on every call (it copies the
  answers it computed before), so every spot check, recall and fresh set passes; honest, and slower on the sets it
  has seen, until its 40th call on a seen set. The fresh-set rule compared each fresh call with the two rotated calls
  just before it, so the calls after the last fresh call were never compared with anything: a big working set (over
  256 MiB: most of KernelBench level 1 at full size on the GPU) has one fresh call in all, in the first round, and
  ``standard_fast`` has none after its third round. A GEMM at 0.5x eager was graded **reward 2** (speedup 2.3-2.6) in
  both (standard preset with the big-set thresholds lowered as the tests of session 41 do; ``standard_fast`` at
  reduced sizes as they are). Now the fresh calls are also compared with the time the look would report, its
  samples' median (``harness/timed_run.slower_than_reported``): the cache is timed at its fresh calls.

Open (no e2e test: its verdict is a coin toss at reduced sizes): **a precision drop gated on a sample of the input's
range** (T15/T18, ``MATMUL_RANGE_GATED_HALF``). A GEMM on half-precision operands whenever 64 sampled elements lie in
``torch.rand``'s [0, 1] gets the fp32 product on every widened kind with signs or a new scale (``wide``, ``large``,
``shift``: the sample leaves the range) and rounds the others (``shrink``, ``dup``, ``spike``), where without dense
signs the 2**-11 rounding stays inside the paper's 1e-2 tolerance except where two spikes of opposite sign cancel in
one output element: at N=128 a spike set fails it 9 times in 40 (the standard pass calls four: graded correct two
runs in four), at N=512 0 in 10. It is wrong on valid inputs (signed operands whose sampled positions hold 0.5 fail
the paper's rule: 0.8% of the elements at x4, 1.8% at x1024) and faster on a GPU's half-precision units. Cancellation
is what shows a precision drop, and dense signs, which any sample sees, are what makes it; sparse ones (the spikes)
show it only by chance. A precision contract would (a tolerance below half precision's rounding on float32 tasks).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_cpp_text
from tests.integrity.cheats.runtime_s42 import kernels as K
from tests.kernelbench.conftest import DATA, solution_kit

REDUCED = f"kernelbench:{DATA}?sizes=reduced"
CHEATS = {"MATMUL_CACHED_AFTER_FRESH": "1_Square_matrix_multiplication_",
          "MATMUL_RANGE_GATED_HALF": "1_Square_matrix_multiplication_"}


def _grade(tmp_path: Path, stem: str, kernel: str | None, preset: str) -> dict:
    """``cuda-agent score`` of one problem (registry convention, CPU, reduced sizes) with ``kernel`` as its CPU kernel
    (None: the honest one) under timing ``preset`` (no compile baseline, two verify sets); its report row."""
    from cuda_agent.cli import main

    kernels, conventions = solution_kit()
    problem = next(p for p in kernels.PROBLEMS if p.stem == stem)
    if kernel is not None:
        problem = dataclasses.replace(problem, cpu_kernel=kernel)
    folders = conventions.write_all(tmp_path / "solutions", ("registry",), ("cpu",), (problem,))
    cfg = tmp_path / "score.yaml"
    cfg.write_text("plugins:\n  cpu:\n    harness:\n      verify: {input_sets: 2}\n"
                   f"      timing: {{preset: {preset}, compile_baseline: false, "
                   f"baseline_cache_dir: {tmp_path / 'bl'}}}\n")
    out = tmp_path / "out"
    main(["score", str(folders[("registry", "cpu")]), "--tasks", REDUCED, "--backend", "cpu", "--out", str(out),
          "-c", str(cfg), "--only", stem])
    (row,) = json.loads((out / "report.json").read_text())["tasks"]
    return row


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_nothing_static_stops_the_red_team_kernels(name: str) -> None:
    assert check_cpp_text(getattr(K, name), "kernels/k.cpp") == []


def test_fresh_calls_slower_than_the_reported_time_are_a_gap() -> None:
    from cuda_agent.harness.timed_run import slower_than_reported

    # one fresh call at 0.2 ms, its neighbours as slow (no gap there), the rest of the pass at 0.04 ms
    pairs = [(0.2, 0.2)]
    assert slower_than_reported(pairs, [0.2] * 30 + [0.04] * 66, 0.25)
    assert not slower_than_reported(pairs, [0.2] * 60 + [0.04] * 36, 0.25)  # the median is the fresh calls' pace
    assert not slower_than_reported([(0.22, 0.2)], [0.2] * 99, 0.25)  # within the slack
    assert not slower_than_reported([(0.0021, 0.001)], [0.0001] * 9, 0.25)  # under the absolute slack (2 us)
    assert not slower_than_reported([], [0.1], 0.25) and not slower_than_reported(pairs, [], 0.25)


@pytest.fixture
def big_working_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every working set counts as big: one fresh call in the pass, one widened recall a round made at its position
    (as on the GPU at full size)."""
    import cuda_agent.harness.fresh_sets as fresh_sets
    import cuda_agent.harness.widened_run as widened_run

    monkeypatch.setattr(fresh_sets, "BIG_FRESH_BYTES", 0)
    monkeypatch.setattr(widened_run, "BIG_RECALL_BYTES", 0)


@pytest.mark.slow
def test_a_cache_switched_on_after_a_big_sets_only_fresh_call_is_timed_at_its_fresh_calls(
        tmp_path: Path, big_working_set: None) -> None:
    row = _grade(tmp_path, "1_Square_matrix_multiplication_", K.MATMUL_CACHED_AFTER_FRESH, "standard")
    # Before: 'correct', reward 2, speedup 2.3-2.6 (the honest GEMM reads 0.5); every call's output was right.
    assert row["status"] == "correct", row["message"][:400]
    assert row["reward"] <= 1.0 and "fresh_inputs_slower" in row["flags"], (row["reward"], row["speedup_eager"])


@pytest.mark.slow
def test_a_cache_switched_on_after_standard_fasts_fresh_rounds_is_timed_at_its_fresh_calls(tmp_path: Path) -> None:
    row = _grade(tmp_path, "1_Square_matrix_multiplication_", K.MATMUL_CACHED_AFTER_FRESH, "standard_fast")
    # Before: 'correct', reward 2, speedup 1.6 (nine rounds; the fresh calls all in the first three).
    assert row["status"] == "correct", row["message"][:400]
    assert row["reward"] <= 1.0 and "fresh_inputs_slower" in row["flags"], (row["reward"], row["speedup_eager"])


@pytest.mark.slow
def test_the_honest_gemm_of_a_big_working_set_keeps_its_time(tmp_path: Path, big_working_set: None) -> None:
    row = _grade(tmp_path, "1_Square_matrix_multiplication_", None, "standard")
    assert row["status"] == "correct" and row["reward"] == 1.0, row["message"][:400]

