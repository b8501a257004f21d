"""Session 41's red team against the runtime side (CPU backend, ``cuda-agent score``, reduced KernelBench sizes, real
builds and runners): kernels right on the task's own input distribution and wrong on other valid inputs, which got
past every widened set of the grading pass two ways, each graded correct (reward 1) before the fix:

- **Counting calls** (a static integer, which the source rules allow): honest for the first 14 calls, which covered
  every verification and widened set (the grading pass made them all before it timed), then ReLU as the identity,
  softmax without the max shift, a GEMM on half-precision operands: right on ``torch.rand`` inputs, so on every
  timed call, fresh set and spot check. Now every kind but ``dup`` that gave a conclusive widened set is made anew
  from a new seed for every grading round and called, checked, at a secret position among its timed calls
  (``harness/widened_run.make_recalls``, ``call_again``). New sets, because a kernel that remembered a sample of every
  input of its first 14 calls recognised the same sets called again (reward 1 against that first version of the fix).
- **Sampling the input** (64 elements, or 16 per row): ReLU as the identity when the sample has no negative, softmax
  without the max shift when it is small. Every widened kind moves all elements, so the sample sees it. Now the
  ``spike`` kind (``harness/widening.py``) replaces 1/4096 of the elements of a fresh set by x1024 max|x| spikes,
  which a sample misses.

The kernels (``tests/integrity/cheats/redteam_s41/kernels.py``) replace the honest ones of
``examples/solutions/kernelbench``; the comparison does not depend on the convention, so the CPU suite writes them in
the registry convention (the session ran release and single-file builds once: same verdicts).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from cuda_agent.harness.integrity import check_cpp_text
from cuda_agent.harness.widening import KINDS, SCHEDULE, SPIKE_MIN, shrink_steps, widen_plan, widen_tensor
from tests.integrity.cheats.redteam_s41 import kernels as K
from tests.kernelbench.conftest import DATA, score, solution_kit  # noqa: F401 - score is a fixture

REDUCED = f"kernelbench:{DATA}?sizes=reduced"
CHEATS = {"RELU_COUNTED": "19_ReLU", "RELU_SAMPLED": "19_ReLU", "SOFTMAX_COUNTED": "23_Softmax",
          "SOFTMAX_SAMPLED": "23_Softmax", "MATMUL_COUNTED_HALF": "1_Square_matrix_multiplication_",
          "MATMUL_SAMPLED_HALF": "1_Square_matrix_multiplication_", "RELU_MEMORIZED": "19_ReLU"}


def _problems(*names: str):  # type: ignore[no-untyped-def]
    kernels, _ = solution_kit()
    by_stem = {p.stem: p for p in kernels.PROBLEMS}
    return tuple(dataclasses.replace(by_stem[CHEATS[n]], cpu_kernel=getattr(K, n)) for n in names)


def _score(tmp_path: Path, score, *names: str) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    _, conventions = solution_kit()
    problems = _problems(*names)
    folders = conventions.write_all(tmp_path / "solutions", ("registry",), ("cpu",), problems)
    _, report = score(folders[("registry", "cpu")], REDUCED, "cpu", tmp_path / "out")
    rows = {r["problem"].rsplit("/", 1)[-1]: r for r in report["tasks"]}
    assert set(rows) == {p.stem for p in problems}, report["tasks"]
    return rows


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_nothing_static_stops_the_red_team_kernels(name: str) -> None:
    # What the run-time checks below are for: static integers and a sample are allowed C++.
    assert check_cpp_text(getattr(K, name), "kernels/k.cpp") == []


def test_a_spike_set_keeps_the_drawn_values_but_a_few_within_the_domain() -> None:
    assert "spike" in KINDS and "spike" in SCHEDULE
    x = torch.rand(64, 512)
    plan, line = widen_plan(_rand_spec(), kind="spike", seed=7)
    assert plan is not None and plan[0] == "spike" and "spikes" in line
    y = widen_tensor(x, plan, 1.0)
    changed = y != x
    assert SPIKE_MIN <= int(changed.sum()) <= 16 and (y[changed].abs() > 1000).all()
    assert (y[changed] < 0).any() and (y[changed] > 0).any()  # an open domain gets both signs
    assert torch.equal(widen_tensor(x, plan, 1.0), y)  # made again from its seed: the same set
    assert shrink_steps([plan]) == [1.0, 0.25, 0.0625, 0.015625]  # x1024 backed off to x16
    bounded = widen_tensor(x, ["spike", 1 / 4096, 7, 0.0, None], 1.0)  # the inputs of log: positive spikes only
    assert (bounded >= 0).all() and (bounded > 1000).sum() >= SPIKE_MIN // 2


def _rand_spec():  # type: ignore[no-untyped-def]
    from cuda_agent.schemas.task import TensorSpec

    return TensorSpec.model_validate({"name": "x", "kind": "tensor", "dtype": "float32", "shape": [64, 512],
                                      "domain": {"kind": "uniform", "sampled_low": 0.0, "sampled_high": 1.0}})


@pytest.mark.slow
def test_kernels_counting_their_calls_past_the_widened_sets_are_graded_incorrect(tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    rows = _score(tmp_path, score, "RELU_COUNTED", "SOFTMAX_COUNTED", "MATMUL_COUNTED_HALF")
    summary = {stem: (r["status"], r.get("reward"), r["message"][:300]) for stem, r in rows.items()}
    # Before: each 'correct', reward 1 (every widened set came before the 15th call).
    for row in rows.values():
        assert row["status"] == "incorrect" and "a new set among the timed calls" in row["message"], summary


@pytest.mark.slow
def test_kernels_sampling_their_inputs_are_graded_incorrect(tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    rows = _score(tmp_path, score, "RELU_SAMPLED", "SOFTMAX_SAMPLED", "MATMUL_SAMPLED_HALF")
    summary = {stem: (r["status"], r.get("reward"), r["message"][:300]) for stem, r in rows.items()}
    assert all(r["status"] == "incorrect" for r in rows.values()), summary
    # Before: 'correct', reward 1: their samples never saw a spike. (The half-precision GEMM was already caught by
    # the `wide` kind, whose x4 spread stays under its sample's threshold.)
    for stem in ("19_ReLU", "23_Softmax"):
        assert "(spike" in rows[stem]["message"], summary[stem]


@pytest.mark.slow
def test_a_kernel_remembering_the_sets_it_verified_on_is_graded_incorrect(tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    row = _score(tmp_path, score, "RELU_MEMORIZED")["19_ReLU"]
    # Before: 'correct', reward 1 (also against widened sets called again, had they been the verified ones).
    assert row["status"] == "incorrect" and "a new set among the timed calls" in row["message"], row["message"][:400]


def test_recalls_keep_spike_in_every_round_and_each_other_kind_once_per_33_calls() -> None:
    from cuda_agent.harness.widened_run import BIG_RECALL_BYTES, recall_order, round_recalls

    kinds = ["wide", "large", "spike", "signs", "shift"]
    order = recall_order(kinds)
    assert order[0] == "spike" and sorted(order) == sorted(kinds)
    assert "spike" not in recall_order(["wide", "large"])
    rest = order[1:]
    # small, rounds of 33 calls (standard): every kind every round, made before the batch
    assert all(round_recalls(order, r, BIG_RECALL_BYTES, 33) == (order, False) for r in range(3))
    # small, rounds of 11 (standard_fast, 3 sure to run): spike every round, the others dealt over three rounds,
    # each once per 33 calls
    rounds = [round_recalls(order, r, 1024, 11, 3) for r in range(9)]
    assert all(kinds_r[0] == "spike" and not lazy for kinds_r, lazy in rounds)
    for start in (0, 3, 6):
        dealt = [k for kinds_r, _ in rounds[start:start + 3] for k in kinds_r[1:]]
        assert sorted(dealt) == sorted(rest)
    # a pass of one round (the quick preset; 12 calls) recalls every kind in it, whatever its length
    assert round_recalls(order, 0, 1024, 12, 1) == (order, False)
    assert [round_recalls(order, r, 1024, 11, 2)[0][1:] for r in range(2)] == [rest[0::2], rest[1::2]]
    # big: one set a round, made at its position: spike in even rounds, the others in turn in odd ones
    big = BIG_RECALL_BYTES + 1
    got = [round_recalls(order, r, big) for r in range(8)]
    assert got == [(["spike"], True) if r % 2 == 0 else ([rest[(r // 2) % 4]], True) for r in range(8)]
    assert [round_recalls(rest, r, big)[0] for r in range(5)] == [[rest[r % 4]] for r in range(5)]  # no spike kind
    assert round_recalls([], 0, big) == ([], False)


@pytest.mark.slow
def test_a_big_working_sets_recalls_made_at_their_position_still_catch_a_counter_and_pass_honest_work(
        tmp_path: Path, score, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Every working set counts as big here, so each round's one recall is made inside the batch, after any fresh set
    # still held has been called (harness/timed_run.py); the counting ReLU is caught, the honest softmax passes.
    import cuda_agent.harness.widened_run as widened_run

    monkeypatch.setattr(widened_run, "BIG_RECALL_BYTES", 0)
    kernels, conventions = solution_kit()
    by_stem = {p.stem: p for p in kernels.PROBLEMS}
    problems = (dataclasses.replace(by_stem["19_ReLU"], cpu_kernel=K.RELU_COUNTED), by_stem["23_Softmax"])
    folders = conventions.write_all(tmp_path / "solutions", ("registry",), ("cpu",), problems)
    _, report = score(folders[("registry", "cpu")], REDUCED, "cpu", tmp_path / "out")
    rows = {r["problem"].rsplit("/", 1)[-1]: r for r in report["tasks"]}
    assert rows["19_ReLU"]["status"] == "incorrect", rows["19_ReLU"]["message"][:400]
    assert "a new set among the timed calls" in rows["19_ReLU"]["message"]
    assert rows["23_Softmax"]["status"] == "correct", rows["23_Softmax"]["message"][:400]
