"""A device step that waits for something other than the device lets its place go meanwhile.

A step waiting for room in the memory budget used to keep its place in the step gate (``eval.device_steps``)
for the whole wait: in session 34's ``tasks check`` at ``device_steps=2`` a big task waited a minute for 65 GiB
while holding one of the two places, so the device ran one step at a time. ``released_step_places`` gives the
thread's places back for such a wait (the session's memory wait, a reference or runner process starting) and
takes them again after it.
"""

from __future__ import annotations

import threading

from cuda_agent.harness.evaluation.scheduling import StepGate, released_step_places


def test_a_waiting_step_lets_another_step_in_and_takes_its_place_back() -> None:
    gate = StepGate(1)
    waiting, entered, wait_over = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    def waiter() -> None:
        with gate:
            with released_step_places():
                waiting.set()
                wait_over.wait(10)  # e.g. room in the memory budget
            order.append("waiter back on the device")

    def other() -> None:
        waiting.wait(10)
        with gate:
            entered.set()
            order.append("other step ran")
            wait_over.set()

    threads = [threading.Thread(target=waiter), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert entered.is_set(), "the other step could not run while the first one waited off the device"
    assert order == ["other step ran", "waiter back on the device"]
    assert gate.held == 0 and not gate.locked()


def test_the_place_is_taken_again_before_the_step_goes_on() -> None:
    gate = StepGate(1)
    inside = threading.Event()
    leave = threading.Event()
    resumed = threading.Event()

    def holder_of_the_place() -> None:
        inside.wait(10)
        with gate:
            leave.wait(10)

    def step() -> None:
        with gate:
            with released_step_places():
                inside.set()
                while not gate.locked():  # the other thread has taken the place
                    pass
            resumed.set()

    a, b = threading.Thread(target=holder_of_the_place), threading.Thread(target=step)
    b.start()
    a.start()
    assert not resumed.wait(0.5)  # the step waits for its place like any newcomer
    leave.set()
    a.join(10)
    b.join(10)
    assert resumed.is_set() and gate.held == 0


def test_without_a_place_nothing_is_released_and_nested_holds_come_back() -> None:
    with released_step_places():
        pass
    outer, inner = StepGate(2), StepGate(1)
    with outer, inner:
        with released_step_places():
            assert outer.held == 0 and inner.held == 0
        assert outer.held == 1 and inner.held == 1
    assert outer.held == 0 and inner.held == 0


def test_a_thread_still_holding_a_timing_lock_keeps_its_place(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Giving the place back while a timing lock is still held would let a step that holds the place wait for the
    exclusive mode on this thread's shared hold, while this thread waits for the place: a deadlock."""
    from cuda_agent.harness.device_lock import TimingLock

    gate = StepGate(1)
    lock = TimingLock("cpu0", lock_dir=tmp_path)
    with gate, lock.shared():
        with released_step_places():
            assert gate.held == 1
    with gate:
        with released_step_places():
            assert gate.held == 0
