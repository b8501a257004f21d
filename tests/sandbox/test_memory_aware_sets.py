"""Memory-aware input sets on real processes: sets sized to the device's budget, made again from their seeds,
tasks that wait their turn, tasks too large to run at all, and widened sets in the grading pass (issue 21)."""

from __future__ import annotations

import threading
import textwrap

import pytest

from cuda_agent.harness.memory_budget import MiB
from cuda_agent.harness.tasks import load_task_code
from cuda_agent.schemas.result import Status

from tests.sandbox.conftest import CACHING_RELU_BINDING, caching_relu_kernel

#: A ReLU whose sets are 16 MiB in, 16 MiB out: big enough that a small budget holds only two of them.
BIG_RELU = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.rand(64, 65536)]


    def get_init_inputs():
        return []
    """
)

#: y = 1.0 * x: right on torch.rand inputs (never negative), wrong anywhere else (T18).
SPECIALISED_RELU = """
import torch
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.scale_forward(x, out, 1.0)
        return out
"""

#: 1.05 GiB: two sets on each side, of the seven a grading pass uses (see memory_budget.session_bytes).
SMALL_BUDGET_GIB = 1.05


@pytest.fixture(scope="module")
def big_relu():  # type: ignore[no-untyped-def]
    return load_task_code(BIG_RELU, "tests/big_relu", device="cpu", isolation="process")


def test_an_honest_kernel_grades_correct_with_fewer_sets_held_than_it_uses(make_evaluator, make_ws, kit, honest_relu,
                                                                           big_relu) -> None:  # type: ignore[no-untyped-def]
    ev = make_evaluator(limits={"device_memory_gib": SMALL_BUDGET_GIB})
    try:
        r = ev.grade(big_relu, make_ws(honest_relu, BIG_RELU), kit)
    finally:
        ev.close()
    assert r.status is Status.correct, r.summary_for_agent()
    mem = r.diagnostics.memory
    assert mem is not None and mem.reference_sets == 2 and mem.runner_sets == 2
    assert mem.remade_sets > 0  # dropped sets were made again from their seeds, identical (else an error)
    assert mem.reserved_bytes <= mem.capacity_bytes
    assert r.diagnostics.widened is not None and r.diagnostics.widened.checked == 8  # 7 before the spike kind (s41)
    assert r.timing is not None and r.speedup_eager is not None


def test_a_kernel_specialised_to_the_input_distribution_fails_grading(make_evaluator, make_ws, kit, big_relu) -> None:  # type: ignore[no-untyped-def]
    ev = make_evaluator()
    try:
        verified = ev.verify(big_relu, make_ws(SPECIALISED_RELU, BIG_RELU), kit)
        graded = ev.grade(big_relu, make_ws(SPECIALISED_RELU, BIG_RELU), kit)
    finally:
        ev.close()
    assert verified.status is Status.correct  # the task's own inputs are never negative
    assert graded.status is Status.incorrect
    assert "widened" in graded.message and "[-4, 4)" in graded.message


def test_a_task_that_cannot_fit_one_set_is_too_large_not_an_error(make_evaluator, make_ws, kit, honest_relu,
                                                                  big_relu) -> None:  # type: ignore[no-untyped-def]
    ev = make_evaluator(limits={"device_memory_gib": 0.5})
    try:
        r = ev.grade(big_relu, make_ws(honest_relu, BIG_RELU), kit)
    finally:
        ev.close()
    assert r.status is Status.too_large
    assert "needs" in r.message and "but only 512 MiB of device memory can be reserved" in r.message
    assert not r.passed


def test_concurrent_tasks_whose_footprints_exceed_the_budget_all_finish(make_evaluator, make_ws, kit, honest_relu,
                                                                        big_relu) -> None:  # type: ignore[no-untyped-def]
    ev = make_evaluator(limits={"device_memory_gib": SMALL_BUDGET_GIB})
    results = []
    workspaces = [make_ws(honest_relu, BIG_RELU) for _ in range(4)]

    def one(ws) -> None:  # type: ignore[no-untyped-def]
        results.append(ev.verify(big_relu, ws, kit))

    threads = [threading.Thread(target=one, args=(ws,)) for ws in workspaces]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=900)
        budget = ev.memory.budget
    finally:
        ev.close()
    assert len(results) == 4 and all(r.status is Status.correct for r in results), [r.message for r in results]
    assert budget.peak_reserved <= budget.capacity  # never more reserved at once than there is
    assert budget.peak_reserved > 700 * MiB  # and the sessions did reserve (each about 670 MiB + the process)
    assert budget.reserved == 0  # every reference process closed, every session released


#: Caches its outputs by eight sampled input elements (T12): right on every set, fast only on data it has seen.
CACHING_KERNEL = caching_relu_kernel(20, full_key=True)  # keyed on every element: the dup sets cannot see it
CACHING_BINDING = CACHING_RELU_BINDING


@pytest.mark.slow
def test_a_content_cache_is_still_caught_when_the_rotation_is_two_sets(make_evaluator, make_ws, kit_builder,
                                                                       honest_relu, big_relu) -> None:  # type: ignore[no-untyped-def]
    """A constrained session rotates its timed calls over the two sets both sides hold; the never-seen sets of every
    batch still meet a cache keyed on content, and the fresh-set rule flags it. (A cache keyed on sampled elements is
    graded incorrect since session 38, on the widened near-duplicate sets; this one hashes every element.)"""
    caching_kit = kit_builder("caching-kit-big", {"caching.cpp": CACHING_KERNEL, "caching_binding.cpp": CACHING_BINDING},
                              "cpu")
    ev = make_evaluator(limits={"device_memory_gib": SMALL_BUDGET_GIB},
                        protocol={"min_calls": 12, "max_calls": 24, "grade_calls_per_round": 12})
    try:
        graded = ev.grade(big_relu, make_ws(honest_relu, BIG_RELU), caching_kit)
    finally:
        ev.close()
    assert graded.status is Status.correct, graded.summary_for_agent()  # its outputs are right
    assert graded.diagnostics.memory is not None and graded.diagnostics.memory.runner_sets == 2
    assert "fresh_inputs_slower" in graded.flags


def test_baselines_record_the_precision_flags_they_ran_with(cpu_evaluator, make_ws, kit, honest_relu, tasks) -> None:  # type: ignore[no-untyped-def]
    r = cpu_evaluator.grade(tasks.relu, make_ws(honest_relu), kit)
    assert r.status is Status.correct, r.summary_for_agent()
    flags = r.baselines.backend_flags
    assert flags["float32_matmul_precision"] == "highest" and flags["cudnn_allow_tf32"] in (True, False)
    assert set(flags) >= {"cudnn_enabled", "cudnn_benchmark", "cudnn_deterministic"}
