"""CPU slots are one machine: every CPU evaluator, whatever its slot, times under the machine's one timing lock
(the ``cpu0`` the scheduler's device steps hold shared) and reserves memory in one budget. CPU slot 1 once had its
own lock (``cpu1``): two slots timed at once on the same cores, and a step holding ``cpu0`` deadlocked in CI."""

from __future__ import annotations

from cuda_agent.harness.device_lock import device_timing_lock
from cuda_agent.harness.evaluator import Evaluator


def test_cpu_slots_share_the_machines_timing_lock_and_memory_budget() -> None:
    with Evaluator("cpu", device_index=0) as first, Evaluator("cpu", device_index=1) as second:
        assert first.lock.path == second.lock.path == device_timing_lock("cpu", 0).path
        assert first.memory.budget is second.memory.budget
        with first.lock:  # the second slot's timing waits for the first's: it is the same lock, held
            assert second.lock.held_exclusive()
