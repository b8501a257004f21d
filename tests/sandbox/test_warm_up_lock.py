"""A reference process's warm-up never runs its device work beside a timed batch, yet compiles outside the lock.

The warm-up (public-seed inputs made on the device, an eager forward, torch.compile's first call) used to take no
timing lock: it could run beside another task's timed batch. The reference process now holds the device's lock in
the shared mode around that work itself, and lets go of it while TorchDynamo compiles (CPU work that may take
minutes, which must not stall every timed batch on the device).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import torch

from cuda_agent.harness.device_lock import TimingLock
from cuda_agent.harness.reference_baselines import released_while_compiling


def _exclusive_free(lock: TimingLock) -> bool:
    """Whether an exclusive hold (a timed batch) could start now: a non-blocking LOCK_EX on a new open file."""
    fd = os.open(lock.path, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing releases a lock it got
    return True


def test_the_shared_hold_is_let_go_while_dynamo_compiles_and_held_again_to_run(tmp_path: Path) -> None:
    lock = TimingLock("cpu0", lock_dir=tmp_path)
    seen_during_compile: list[bool] = []

    def probe(_args: object) -> None:  # registered after the harness's callback: runs once the hold is let go
        seen_during_compile.append(_exclusive_free(lock))

    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    compiled = torch.compile(double, backend="eager")
    from torch._dynamo.callback import callback_handler

    with lock.shared():
        assert not _exclusive_free(lock)
        with released_while_compiling(torch, lock):
            callback_handler.register_start_callback(probe)
            try:
                out = compiled(torch.ones(3))
            finally:
                callback_handler.remove_start_callback(probe)
            assert not _exclusive_free(lock)  # held again before the compiled code ran and after
        assert not _exclusive_free(lock)
    assert _exclusive_free(lock)
    assert seen_during_compile == [True]
    assert torch.equal(out, torch.full((3,), 2.0))


def test_without_a_lock_the_block_runs_as_it_is(tmp_path: Path) -> None:
    with released_while_compiling(torch, None):
        assert torch.compile(lambda x: x + 1, backend="eager")(torch.zeros(2)).tolist() == [1.0, 1.0]


def test_lock_at_names_the_same_files_as_the_device_lock(tmp_path: Path) -> None:
    lock = TimingLock("cuda0", lock_dir=tmp_path)
    again = TimingLock.at(str(lock.path))
    assert (again.path, again.turnstile) == (lock.path, lock.turnstile)


TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 3.0


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""


def test_a_warm_up_waits_for_a_timed_batch_on_its_device(make_evaluator, tasks, tmp_path: Path) -> None:
    """While a timed batch holds the device (the exclusive mode, here taken by the test), a task's warm-up does not
    finish; it does as soon as the batch ends. The first, uncontended warm-up gives the time it needs."""
    from cuda_agent.harness.tasks import load_task_file

    task_file = tmp_path / "triple.py"
    task_file.write_text(TASK)
    triple = load_task_file(task_file, id="triple")
    with make_evaluator(sandbox={"runners_ahead": 0}, timing={"compile_baseline": False}) as ev:
        t0 = time.monotonic()
        assert ev.prepare(tasks.relu) is True
        alone_s = time.monotonic() - t0
        done: list[bool] = []
        worker = threading.Thread(target=lambda: done.append(ev.prepare(triple)))
        with ev.lock:  # a timed batch on this device
            worker.start()
            worker.join(timeout=max(3 * alone_s, 20.0))
            assert worker.is_alive() and not done, "the warm-up ran beside a timed batch"
        worker.join(timeout=120)
        assert done == [True]


def test_a_reference_process_builds_its_model_only_when_no_timed_batch_runs(tmp_path: Path) -> None:
    """The model's construction on the device (its parameters' initialisation runs kernels) holds the lock shared
    in the reference process: a start asked for during a timed batch finishes only after it."""
    from cuda_agent.harness.reference_client import ReferenceClient

    lock = TimingLock("cpu0", lock_dir=tmp_path)
    alone = ReferenceClient("cpu", timing_lock=lock)
    try:
        t0 = time.monotonic()
        alone.start(TASK)  # the child imports torch, then builds the model
        alone_s = time.monotonic() - t0
    finally:
        alone.close()
    ref = ReferenceClient("cpu", timing_lock=lock)
    try:
        done: list[bool] = []
        worker = threading.Thread(target=lambda: (ref.start(TASK), done.append(True)))
        with lock:  # a timed batch on this device
            worker.start()
            worker.join(timeout=max(3 * alone_s, 20.0))
            assert worker.is_alive() and not done, "the model was built beside a timed batch"
        worker.join(timeout=120)
        assert done == [True] and ref.init_inputs == []
    finally:
        ref.close()
