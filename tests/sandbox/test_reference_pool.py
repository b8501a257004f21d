"""Warm reference processes per evaluator: an LRU that never closes a process a session is using, and starts
that do not hold up other tasks (real reference processes on CPU)."""

from __future__ import annotations

import threading
import time

from cuda_agent.harness.evaluator import Evaluator
from cuda_agent.harness.settings import HarnessSettings
from cuda_agent.schemas.task import TaskManifest


def _task(name: str, scale: float) -> TaskManifest:
    code = (
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        f"    def forward(self, x):\n        return x * {scale}\n"
        "def get_inputs():\n    return [torch.ones(4)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    return TaskManifest.from_code(f"tests/{name}", code)


def test_a_process_in_use_is_never_closed_to_make_room(tmp_path):
    ev = Evaluator("cpu", HarnessSettings(baseline_cache_dir=tmp_path / "b", pool_size=1, warm_references=1))
    a_task, b_task, c_task = _task("a", 2.0), _task("b", 3.0), _task("c", 4.0)
    try:
        a = ev.acquire_reference(a_task)
        b = ev.acquire_reference(b_task)  # over the limit, but a is in use
        assert a.alive and b.alive and a.users == 1 and b.users == 1
        ev.release_reference(a)  # now a is unused, oldest and beyond the limit: closed
        assert not a.alive and b.alive
        ev.release_reference(b)
        c = ev.acquire_reference(c_task)  # b unused: closed to make room
        assert not b.alive and c.alive
        again = ev.acquire_reference(c_task)  # the warm one again, counted twice
        assert again is c and c.users == 2
        ev.release_reference(c)
        ev.release_reference(c)
    finally:
        ev.close()


def test_a_retired_process_closes_when_its_last_session_ends(tmp_path):
    ev = Evaluator("cpu", HarnessSettings(baseline_cache_dir=tmp_path / "b", pool_size=1))
    task = _task("r", 2.0)
    try:
        first = ev.acquire_reference(task)
        second = ev.acquire_reference(task)
        assert first is second and first.users == 2
        with ev._refs_lock:  # what _release_sets does when device memory stays pinned
            ev._refs.pop(task.code_hash)
            first.retired = True
        ev.release_reference(first)
        assert first.alive  # one session still uses it
        fresh = ev.acquire_reference(task)
        assert fresh is not first and fresh.alive
        ev.release_reference(second)
        assert not first.alive
        ev.release_reference(fresh)
    finally:
        ev.close()


def test_a_warm_task_does_not_wait_for_another_tasks_process_to_start(tmp_path):
    ev = Evaluator("cpu", HarnessSettings(baseline_cache_dir=tmp_path / "b", pool_size=1))
    warm_task, cold_task = _task("warm", 2.0), _task("cold", 5.0)
    try:
        ev.release_reference(ev.acquire_reference(warm_task))
        started = threading.Thread(target=lambda: ev.release_reference(ev.acquire_reference(cold_task)))
        started.start()
        deadline = time.monotonic() + 30
        while not (cold_task.code_hash in ev._ref_start_locks and ev._ref_start_locks[cold_task.code_hash].locked()):
            assert time.monotonic() < deadline, "the cold start never began"
            time.sleep(0.005)
        ref = ev.acquire_reference(warm_task)  # returns while the cold process is still importing torch
        assert cold_task.code_hash not in ev._refs, "the warm task waited for the other task's process start"
        ev.release_reference(ref)
        started.join(timeout=120)
        assert cold_task.code_hash in ev._refs
    finally:
        ev.close()


def test_close_asks_every_process_to_exit_before_waiting_for_any(tmp_path):
    """``Evaluator.close`` stops all warm reference processes at once (one by one, 16 of them took 20 s at the end
    of an eval run on the H200): a stop request alone makes a process exit, and after close none is left."""
    from cuda_agent.harness.reference import ReferenceProcess

    lone = ReferenceProcess(_task("lone", 5.0).code, "cpu")
    lone.request_stop()
    lone.request_stop()  # idempotent
    assert lone.proc.wait(60) == 0  # exits by itself on the request: close() need not kill it
    lone.close()
    ev = Evaluator("cpu", HarnessSettings(baseline_cache_dir=tmp_path / "b", pool_size=1, warm_references=4))
    refs = []
    for i in range(3):
        ref = ev.acquire_reference(_task(f"t{i}", 2.0 + i))
        ev.release_reference(ref)
        refs.append(ref)
    assert all(r.alive for r in refs)
    ev.close()
    assert [r.proc.returncode for r in refs] == [0, 0, 0]  # every one exited cleanly, none was killed


def test_a_new_task_takes_a_spare_started_ahead_and_spares_close_cleanly(tmp_path):
    """With ``spare_references`` the evaluator keeps processes started ahead of time (torch imported, no task);
    the next new task's reference is one of them, and a spare that never got a task exits cleanly at close."""
    ev = Evaluator("cpu", HarnessSettings(baseline_cache_dir=tmp_path / "b", pool_size=1, spare_references=1))
    try:
        first = ev.acquire_reference(_task("s1", 2.0))
        (spare,) = ev._spare_refs
        assert spare.alive and not spare.started and first.started
        second = ev.acquire_reference(_task("s2", 3.0))
        assert second is spare and second.started  # the spare got the task
        assert second.call("threads") == 1  # and serves it
        (refill,) = ev._spare_refs
        assert refill is not spare and not refill.started
        ev.release_reference(first)
        ev.release_reference(second)
    finally:
        ev.close()
    assert refill.proc.returncode == 0 and spare.proc.returncode == 0
