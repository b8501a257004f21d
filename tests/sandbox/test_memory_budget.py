"""The per-device memory budget: set plans sized to the device, reservations that wait their turn."""

from __future__ import annotations

import threading
import time

import pytest

from cuda_agent.harness.memory_budget import (USABLE_SHARE, GiB, MiB, Footprint, MemoryBudget, TooLarge,
                                              clamped_capacity, plan_sets, session_bytes)

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


def _pooling_manifest(work_bytes: int | None):  # type: ignore[no-untyped-def]
    """KernelBench level1/45_Average_Pooling_2D at today's size, as a CUDA probe's facts give it (16 GiB in)."""
    from cuda_agent.harness.tasks import manifest_from_facts

    code = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
            "        return torch.nn.functional.avg_pool2d(x, 11)\n\n"
            "def get_inputs():\n    return [torch.rand(16, 64, 2048, 2048)]\n\ndef get_init_inputs():\n    return []\n")
    facts = {"inputs": [{"name": "input0", "kind": "tensor", "shape": [16, 64, 2048, 2048], "dtype": "float32",
                         "nbytes": 16 * GiB, "min": 0.0, "max": 1.0}],
             "outputs": [{"name": "output0", "shape": [16, 64, 186, 186], "dtype": "float32",
                          "nbytes": 16 * 64 * 186 * 186 * 4}],
             "init_inputs": [], "flops": 1.0, "stochastic": False, "device": "cuda", "torch": "2.11",
             "param_bytes": 0, "work_bytes": work_bytes}
    return manifest_from_facts(code, facts, id="kernelbench/level1/45_Average_Pooling_2D")


def test_the_probes_measured_temporaries_size_a_16_gib_pooling_task_that_the_guess_calls_too_large() -> None:
    """Found on the CPU by benchmarks/kb_footprints.py: before any reference process has measured a forward, the
    planner guessed its temporaries at twice the largest input (32 GiB here), which made 45_Average_Pooling_2D
    too large for an H200's budget, for good, since no session ever ran to measure it. The CUDA probe now measures
    the forward's temporaries; the planner uses them (with a margin) until a session measures its own."""
    from cuda_agent.harness.memory_plan import PROBED_WORK_FLOOR, MemoryPlanner, task_footprint

    capacity = int(0.85 * 139.8 * GiB)  # an H200 at the budget's usable share
    guessed, measured = _pooling_manifest(None), _pooling_manifest(1 * MiB)
    assert "work_bytes" not in guessed.meta and measured.meta["work_bytes"] == MiB
    assert task_footprint(guessed).work_bytes == 2 * 16 * GiB
    assert task_footprint(measured).work_bytes == int(1.25 * MiB) + PROBED_WORK_FLOOR
    planner = MemoryPlanner("cuda", capacity_bytes=capacity)
    with pytest.raises(TooLarge):
        planner.plan(guessed, wanted_sets=5, wanted_fresh=2)
    plan = planner.plan(measured, wanted_sets=5, wanted_fresh=2)
    assert plan is not None and plan.reserved_bytes <= capacity and plan.runner_sets >= 1
    # a session's own measurement, once there is one, wins over the probe's
    planner.note_work(measured, 3 * GiB)
    assert planner.footprint(measured).work_bytes == 3 * GiB


def _until(condition, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Poll ``condition`` (another thread's progress) until it holds; fail after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    tick = threading.Event()
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the other threads"
        tick.wait(0.005)


def test_a_waiting_exclusive_hold_goes_before_a_later_reservation_that_would_fit() -> None:
    """The retry of a session that ran out of memory holds the device alone (all but its reference process): while
    it waits, a smaller reservation that fits beside the sessions still running must wait behind it, else a stream
    of such reservations would keep the device from ever being free for it."""
    budget = MemoryBudget("cuda", capacity=10 * GiB)
    running = budget.hold(4 * GiB, "a session still running")
    order: list[str] = []
    release_exclusive = threading.Event()
    errors: list[BaseException] = []

    def exclusive() -> None:
        try:
            with budget.reserve_exclusive("a session alone", keep=GiB, timeout_s=60):
                order.append("exclusive")
                assert budget.reserved == 9 * GiB
                budget.release(budget.hold(GiB, "its reference process", force=True))  # keep: it fits beside
                release_exclusive.wait(timeout=60)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    def ordinary() -> None:
        try:
            with budget.reserve(2 * GiB, "a later session", timeout_s=60):
                order.append("ordinary")
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    first = threading.Thread(target=exclusive)
    first.start()
    _until(lambda: budget.waiting == 1)
    second = threading.Thread(target=ordinary)
    second.start()
    _until(lambda: budget.waiting == 2)
    assert order == [] and budget.reserved == 4 * GiB  # 6 GiB free, yet the later reservation waits
    budget.release(running)
    _until(lambda: order == ["exclusive"])
    assert budget.waiting == 1 and budget.exclusive_holds == 1  # the later one still waits, behind the device alone
    release_exclusive.set()
    first.join(timeout=60)
    second.join(timeout=60)
    assert not errors
    assert order == ["exclusive", "ordinary"]
    assert budget.reserved == 0 and budget.exclusive_holds == 1


def test_a_session_that_waited_long_holds_new_tasks_back_until_it_fits() -> None:
    """KernelBench's level2/19 needs 65 GiB of an H100's 67: at concurrency 8 it waited until the run's cap while
    smaller tasks kept fitting in beside each other. Once a session has waited ``fair_after_s``, a new task's first
    reservation (an admission) waits behind it; a session already under way still takes what fits."""
    budget = MemoryBudget("cuda", capacity=10 * GiB)
    budget.fair_after_s = 0.3
    running = budget.hold(4 * GiB, "a session still running")
    order: list[str] = []
    errors: list[BaseException] = []

    def take(nbytes: int, what: str, admission: bool, release: threading.Event | None = None) -> None:
        try:
            with budget.reserve(nbytes, what, timeout_s=60, admission=admission):
                order.append(what)
                if release is not None:
                    release.wait(timeout=60)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    budget.release(budget.hold(3 * GiB, "an early warm-up", admission=True))  # nothing starves yet: it fits
    big_done = threading.Event()
    big = threading.Thread(target=take, args=(8 * GiB, "a big session", False, big_done))
    big.start()
    _until(lambda: budget.waiting == 1)
    time.sleep(0.4)  # past fair_after_s
    late = threading.Thread(target=take, args=(3 * GiB, "a new task's warm-up", True))
    late.start()
    _until(lambda: budget.admissions_held == 1)
    assert "a new task's warm-up" not in order  # 6 GiB free, yet it waits behind the big session
    with budget.reserve(GiB, "a session under way", timeout_s=5):  # not an admission: it takes what fits
        assert budget.reserved == 5 * GiB
    budget.release(running)
    _until(lambda: order[:1] == ["a big session"])
    assert "a new task's warm-up" not in order  # 2 GiB free beside the big session: still waiting
    big_done.set()
    big.join(timeout=60)
    late.join(timeout=60)
    assert not errors
    assert order == ["a big session", "a new task's warm-up"] and budget.reserved == 0


def test_an_admission_held_back_closes_no_idle_process() -> None:
    """A new task's warm-up held back behind a starving session may not take memory however much is freed, so it
    does not ask the pool to close idle processes (those warmed for sessions still to come would be started and
    compiled again for nothing); the starving session asks for what it misses itself."""
    budget = MemoryBudget("cuda", capacity=10 * GiB)
    budget.fair_after_s = 0.3
    running = budget.hold(6 * GiB, "a session still running")
    asked_by: list[str] = []
    budget.on_pressure.append(lambda missing: asked_by.append(threading.current_thread().name) or 0)
    errors: list[BaseException] = []

    def take(nbytes: int, what: str, admission: bool) -> None:
        try:
            with budget.reserve(nbytes, what, timeout_s=60, admission=admission):
                pass
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    big = threading.Thread(target=take, args=(8 * GiB, "a big session", False), name="big")
    big.start()
    _until(lambda: budget.waiting == 1)
    time.sleep(0.4)  # past fair_after_s: the big session starves
    late = threading.Thread(target=take, args=(5 * GiB, "a new task's warm-up", True), name="late")
    late.start()
    _until(lambda: budget.admissions_held == 1)
    budget.release(budget.hold(0, "a release: every waiter wakes and looks again"))
    time.sleep(0.2)
    assert "late" not in asked_by and "big" in asked_by
    budget.release(running)
    big.join(timeout=60)
    late.join(timeout=60)
    assert not errors and budget.reserved == 0


def test_an_exclusive_hold_that_never_gets_the_device_times_out_and_lets_the_others_in() -> None:
    budget = MemoryBudget("cpu", capacity=4 * GiB)
    running = budget.hold(GiB, "a session that does not end")
    with pytest.raises(TimeoutError):
        budget.hold_exclusive("a session alone", timeout_s=0.2)
    assert budget.exclusive_holds == 0
    with budget.reserve(GiB, "a later session", timeout_s=5):  # nothing is left waiting in front of it
        assert budget.reserved == 2 * GiB
    budget.release(running)


def test_a_configured_capacity_beyond_the_machine_is_clamped_to_what_is_free() -> None:
    """A preset's figure for a bigger device (device_gib=120 meant an H200; an H100 has 80 GB) must not let tasks
    reserve memory that is not there; a figure within the machine stands."""
    import psutil

    free = psutil.virtual_memory().available
    assert clamped_capacity("cpu", 1 << 50) <= USABLE_SHARE * free * 1.05
    assert clamped_capacity("cpu", 64 * MiB) == 64 * MiB
