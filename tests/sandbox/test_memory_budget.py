"""The per-device memory budget: set plans sized to the device, reservations that wait their turn."""

from __future__ import annotations

import threading

import pytest

from cuda_agent.harness.memory_budget import (GiB, MiB, Footprint, MemoryBudget, TooLarge, plan_sets,
                                              session_bytes)

#: KernelBench level1/19_ReLU at today's size: one 4096 x 393216 fp32 input, an output as large.
RELU = Footprint(input_bytes=6 * GiB, output_bytes=6 * GiB)


def test_a_small_task_holds_every_set_on_both_sides() -> None:
    small = Footprint(input_bytes=8 * MiB, output_bytes=8 * MiB)
    plan = plan_sets(small, "cuda", 120 * GiB, wanted_sets=9, wanted_fresh=4)
    assert (plan.reference_sets, plan.runner_sets, plan.fresh_sets) == (9, 9, 4)
    assert not plan.constrained
    assert plan.reserved_bytes == session_bytes(small, "cuda", 9, 9, 4)


def test_a_big_task_holds_fewer_sets_but_fits() -> None:
    capacity = int(0.85 * 140 * GiB)
    plan = plan_sets(RELU, "cuda", capacity, wanted_sets=9, wanted_fresh=4)
    # The runner gives up its own copies first, down to the two the timed calls rotate over; then the reference.
    assert plan.constrained and plan.runner_sets == 2
    assert 2 <= plan.reference_sets < 9 and plan.fresh_sets == 1
    assert plan.reserved_bytes <= capacity
    # one more set on the reference side would not have fitted
    assert session_bytes(RELU, "cuda", plan.reference_sets + 1, 2, plan.fresh_sets) > capacity


def test_when_two_sets_per_side_do_not_fit_the_runner_holds_one() -> None:
    capacity = session_bytes(RELU, "cuda", 2, 2, 0) - 1
    plan = plan_sets(RELU, "cuda", capacity, wanted_sets=9, wanted_fresh=4)
    assert plan.runner_sets == 1 and plan.reserved_bytes <= capacity


def test_a_task_that_cannot_fit_one_set_is_too_large_with_both_figures() -> None:
    huge = Footprint(input_bytes=40 * GiB, output_bytes=40 * GiB)
    with pytest.raises(TooLarge) as info:
        plan_sets(huge, "cuda", 100 * GiB, wanted_sets=5, wanted_fresh=2)
    assert info.value.needed > info.value.available == 100 * GiB
    assert "GiB" in str(info.value) and "100.0 GiB" in str(info.value)


def test_reservations_wait_their_turn_and_never_exceed_the_capacity() -> None:
    budget = MemoryBudget("cuda", capacity=100 * GiB)
    sizes = [30 * GiB, 45 * GiB, 60 * GiB, 25 * GiB, 70 * GiB, 10 * GiB, 50 * GiB, 40 * GiB]  # 330 GiB in all
    import queue

    inside: queue.Queue[int] = queue.Queue()
    go_on = [threading.Event() for _ in sizes]
    errors: list[BaseException] = []

    def task(i: int) -> None:
        try:
            with budget.reserve(sizes[i], f"task {i}"):
                assert budget.reserved <= budget.capacity
                inside.put(i)
                go_on[i].wait(timeout=60)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=task, args=(i,)) for i in range(len(sizes))]
    for t in threads:
        t.start()
    finished = 0
    while finished < len(sizes):  # let the tasks out one at a time, in the order they got in
        go_on[inside.get(timeout=60)].set()
        finished += 1
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert budget.reserved == 0
    assert budget.peak_reserved <= budget.capacity
    assert budget.peak_reserved >= 70 * GiB


def test_pressure_asks_owners_of_idle_processes_to_let_go() -> None:
    budget = MemoryBudget("cpu", capacity=10 * GiB)
    warm = budget.hold(8 * GiB, "warm reference process")
    asked: list[int] = []

    def close_idle(missing: int) -> int:
        asked.append(missing)
        budget.release(warm)
        return 8 * GiB

    budget.on_pressure.append(close_idle)
    with budget.reserve(6 * GiB, "a session", timeout_s=30):
        assert budget.reserved == 6 * GiB
    assert asked == [4 * GiB]


def test_a_reservation_is_given_back_when_its_block_raises() -> None:
    budget = MemoryBudget("cpu", capacity=GiB)
    with pytest.raises(RuntimeError):
        with budget.reserve(GiB, "failing session"):
            raise RuntimeError("the candidate crashed")
    assert budget.reserved == 0
    with pytest.raises(TimeoutError):
        with budget.reserve(GiB // 2, "a"):
            budget.hold(GiB, "b", timeout_s=0.2)
