"""Warm reference processes per evaluator: an LRU that never closes a process a session is using, starts that do
not hold up other tasks, and processes that end cleanly and quietly (real reference processes on CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from cuda_agent.harness.experiments import ExperimentSettings
from cuda_agent.harness.reference_client import ReferenceClient
from cuda_agent.harness.reference_pool import ReferencePool
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


def _pool(warm_limit: int = 16, spares: int = 0) -> ReferencePool:
    return ReferencePool(lambda: ReferenceClient("cpu", threads=1), init_seed=42, warm_limit=warm_limit, spares=spares)


def test_a_process_in_use_is_never_closed_to_make_room() -> None:
    pool = _pool(warm_limit=1)
    a_task, b_task, c_task = _task("a", 2.0), _task("b", 3.0), _task("c", 4.0)
    try:
        a = pool.acquire(a_task)
        b = pool.acquire(b_task)  # over the limit, but a is in use
        assert a.alive and b.alive and a.users == 1 and b.users == 1
        pool.release(a)  # now a is unused, oldest and beyond the limit: closed
        assert not a.alive and b.alive
        pool.release(b)
        c = pool.acquire(c_task)  # b unused: closed to make room
        assert not b.alive and c.alive
        again = pool.acquire(c_task)  # the warm one again, counted twice
        assert again is c and c.users == 2
        pool.release(c)
        pool.release(c)
    finally:
        pool.close()


def test_memory_pressure_closes_only_what_is_missing_used_processes_first() -> None:
    """Idle processes close until their holds cover the missing bytes: those a session already used first, then
    those warmed for a session still to come (the latest warmed first), never the one this thread spares."""
    pool = _pool()
    used_task, early_task, late_task = _task("used", 2.0), _task("early", 3.0), _task("late", 4.0)
    try:
        used = pool.acquire(used_task)
        pool.release(used)
        early = pool.acquire(early_task)
        pool.mark_warmed(early)  # what the evaluator's warm-up does
        pool.release(early)
        late = pool.acquire(late_task)
        pool.mark_warmed(late)
        pool.release(late)
        for ref in (used, early, late):
            ref.hold_bytes = 100
        assert pool.close_idle(50) == 100  # one process covers it: the one a session already used
        assert not used.alive and early.alive and late.alive
        with pool.sparing(late_task):
            assert pool.close_idle(50) == 100  # the latest warmed would go next, but its task asks
        assert not early.alive and late.alive
        again = pool.acquire(late_task)  # its session: the warmed process, no longer waiting for one
        assert again is late and late.awaiting_session is None
        pool.release(late)
        assert pool.close_idle() == 100 and not late.alive  # no amount named: every idle process goes
    finally:
        pool.close()
    pool = _pool(warm_limit=2)  # beyond the warm limit too, a process warmed for its session goes last
    try:
        warmed = pool.acquire(early_task)
        pool.mark_warmed(warmed)
        pool.release(warmed)
        pool.release(used := pool.acquire(used_task))
        pool.release(pool.acquire(late_task))  # one too many: the used one goes, though the warmed one is older
        assert warmed.alive and not used.alive
    finally:
        pool.close()


def test_a_retired_process_closes_when_its_last_session_ends() -> None:
    pool = _pool()
    task = _task("r", 2.0)
    try:
        first = pool.acquire(task)
        second = pool.acquire(task)
        assert first is second and first.users == 2
        pool.retire(task, first)  # what a session does when device memory stays pinned
        pool.release(first)
        assert first.alive  # one session still uses it
        fresh = pool.acquire(task)
        assert fresh is not first and fresh.alive
        pool.release(second)
        assert not first.alive
        pool.release(fresh)
    finally:
        pool.close()


def test_a_warm_task_does_not_wait_for_another_tasks_process_to_start() -> None:
    started = threading.Event()
    release_start = threading.Event()

    def spawn() -> ReferenceClient:  # the cold task's start is held here until the warm task has been served
        ref = ReferenceClient("cpu", threads=1)
        if cold_spawning.is_set():
            started.set()
            release_start.wait(120)
        return ref

    cold_spawning = threading.Event()
    pool = ReferencePool(spawn, init_seed=42, warm_limit=16, spares=0)
    warm_task, cold_task = _task("warm", 2.0), _task("cold", 5.0)
    try:
        pool.release(pool.acquire(warm_task))
        cold_spawning.set()
        cold = threading.Thread(target=lambda: pool.release(pool.acquire(cold_task)))
        cold.start()
        assert started.wait(120), "the cold start never began"
        assert pool.starting(cold_task)
        ref = pool.acquire(warm_task)  # returns while the cold task's process is being started
        assert not pool.holds(cold_task), "the warm task waited for the other task's process start"
        pool.release(ref)
        release_start.set()
        cold.join(timeout=300)
        assert pool.holds(cold_task)
    finally:
        release_start.set()
        pool.close()


def test_close_asks_every_process_to_exit_before_waiting_for_any() -> None:
    """A stop request alone makes a process exit (the pool need not kill it), and closing the pool stops all its
    processes cleanly: each acknowledges the request and its exit is waited for, however loaded the machine."""
    lone = ReferenceClient("cpu")
    lone.request_stop()
    lone.request_stop()  # idempotent
    assert lone.proc.wait(300) == 0  # exits by itself on the request
    lone.close()
    pool = _pool(warm_limit=4)
    refs = []
    for i in range(3):
        ref = pool.acquire(_task(f"t{i}", 2.0 + i))
        pool.release(ref)
        refs.append(ref)
    assert all(r.alive for r in refs)
    pool.close()
    assert [r.proc.returncode for r in refs] == [0, 0, 0]  # every one exited cleanly, none was killed


def test_a_new_task_takes_a_spare_started_ahead_and_spares_close_cleanly() -> None:
    """With spares the pool keeps processes started ahead of time (torch imported, no task); the next new task's
    process is one of them, and a spare that never got a task exits cleanly at close."""
    pool = _pool(spares=1)
    try:
        first = pool.acquire(_task("s1", 2.0))
        (spare,) = pool.spares
        assert spare.alive and not spare.started and first.started
        second = pool.acquire(_task("s2", 3.0))
        assert second is spare and second.started  # the spare got the task
        assert second.threads() == 1  # and serves it
        (refill,) = pool.spares
        assert refill is not spare and not refill.started
        pool.release(first)
        pool.release(second)
    finally:
        pool.close()
    assert refill.proc.returncode == 0 and spare.proc.returncode == 0


def test_evaluator_sizes_its_pool_from_the_experiment_settings(make_evaluator) -> None:  # type: ignore[no-untyped-def]
    ev = make_evaluator(warm_references=3, spare_references=0)
    try:
        assert ev.references.warm_limit == 3 and ev.references.spares_wanted == 0
    finally:
        ev.close()
    assert ExperimentSettings().spares("cuda") == 2 and ExperimentSettings().spares("cpu") == 0


CHILD = r"""
import faulthandler, signal, sys, time
# A program started from a terminal has Python's SIGINT handler. One started by a non-interactive shell's background
# job (`cmd &`: nohup'd CI runs) inherits SIGINT ignored, and Python then installs no handler: the Ctrl-C this test
# sends would be ignored (seen: the parent hung in every background-launched suite run). Be the terminal program.
signal.signal(signal.SIGINT, signal.default_int_handler)
from cuda_agent.harness.reference_client import ReferenceClient
code = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\ndef get_inputs():\n    return [torch.ones(4)]\ndef get_init_inputs():\n    return []\n"
ref = ReferenceClient("cpu")
ref.start(code)
print("ready", ref.proc.pid, flush=True)
faulthandler.dump_traceback_later(240, exit=False)  # a parent that hangs after the Ctrl-C says where (stderr)
# Short sleeps, not one long one: Linux hands a process-directed SIGINT to any thread not blocking it. When another
# thread (the spawner's) takes it, Python's handler only sets a flag for the main thread, and a main thread inside
# one sleep(600) would see it 600 s later: the parent looked hung after the Ctrl-C (2 of 3 runs when reproduced).
for _ in range(1200):
    time.sleep(0.5)
"""


def test_ctrl_c_ends_the_parent_and_the_reference_process_quietly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SIGINT to the whole process group (a Ctrl-C in a terminal): the parent stops with its KeyboardInterrupt, its
    reference process ignores the signal and ends once the parent is gone, and nothing from the reference process
    (no BrokenPipeError, no traceback) reaches the terminal."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        line = parent.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("ready"), parent.stderr.read()  # type: ignore[union-attr]
        child_pid = int(line.split()[1])
        os.killpg(parent.pid, signal.SIGINT)
        try:
            _, err = parent.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            parent.kill()
            _, err = parent.communicate(timeout=60)
            pytest.fail(f"the parent did not exit within 300 s of the Ctrl-C; its threads 240 s after 'ready':\n{err}")
    finally:
        if parent.poll() is None:
            parent.kill()
    assert "KeyboardInterrupt" in err  # the parent's own (the test script has no handler)
    assert "BrokenPipe" not in err and "reference.py" not in err, err
    deadline = time.monotonic() + 300
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child_pid), "the reference process outlived its parent"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_task_whose_model_cannot_be_built_fails_once_and_leaves_no_process() -> None:
    from cuda_agent.harness.reference_sets import ReferenceError_

    started: list[ReferenceClient] = []

    def spawn() -> ReferenceClient:
        started.append(ReferenceClient("cpu", threads=1))
        return started[-1]

    pool = ReferencePool(spawn, init_seed=42, warm_limit=4, spares=0)
    broken = TaskManifest.from_code("tests/broken", "import torch\nclass Model(torch.nn.Module):\n"
                                    "    def __init__(self):\n        raise ValueError('no model here')\n"
                                    "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    try:
        with pytest.raises(ReferenceError_, match="no model here"):
            pool.acquire(broken)
        assert not pool.holds(broken)
        assert started and started[0].proc.wait(300) is not None  # closed, not left waiting for requests
    finally:
        pool.close()
