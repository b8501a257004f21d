"""Candidate and baselines are timed with the same, configured thread count (real processes).

Before ``cpu_threads`` the candidate ran with ``min(8, cpu_count)`` OpenMP
threads and the reference (baselines) with torch's default (all physical
cores): on a shared CI machine every parallel region of the baselines waited
for preempted team threads, and CPU speedups vs torch.compile came out at
85-1000x. Both processes must report ``settings.cpu_threads``, whatever the
parent's environment says, and baselines measured with another count must
not be reused from the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.baselines import baseline_key
from cuda_agent.harness.candidate_pool import CandidatePool
from cuda_agent.harness.reference_client import ReferenceClient
from cuda_agent.harness.sandbox import RunnerOptions
from cuda_agent.harness.settings import HarnessSettings

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
@pytest.mark.parametrize("parent_env", [None, "3"])
def test_candidate_and_reference_use_the_configured_thread_count(
    parent_env: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if parent_env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", parent_env)
    threads = HarnessSettings().sandbox.cpu_threads
    assert threads == 1
    pool = CandidatePool(RunnerOptions(device="cpu", cpu_threads=threads, scratch_dir=tmp_path), 0)
    proc = pool.acquire()
    try:
        candidate_threads = proc.wait_ready().threads
    finally:
        pool.release(proc)
        pool.close()
    ref = _reference(threads)
    try:
        reference_threads = ref.threads()
    finally:
        ref.close()
    assert candidate_threads == reference_threads == threads


def test_thread_count_is_part_of_the_baseline_key() -> None:
    args = ("hash", "x86_64", "2.13.0", "compile", "ours", "default")
    assert baseline_key(*args, 1) != baseline_key(*args, 2)
    assert baseline_key(*args, 2) == baseline_key(*args, 2)


def _reference(threads: int = 1) -> ReferenceClient:
    ref = ReferenceClient("cpu", threads=threads)
    ref.start(TASK)
    return ref


class _LockWatch:
    """A real TimingLock that records whether it is held, and a real reference process that records its calls."""

    def __init__(self, lock, ref) -> None:  # type: ignore[no-untyped-def]
        self.lock, self.ref, self.held, self.calls = lock, ref, False, []

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.lock.__enter__()
        self.held = True
        return self

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        self.held = False
        return self.lock.__exit__(*exc)

    def prepare_baseline(self, *args):  # type: ignore[no-untyped-def]
        out = self.ref.prepare_baseline(*args)
        self.calls.append(("prepare_baseline", self.held, out))
        return out

    def time_baseline(self, *args):  # type: ignore[no-untyped-def]
        out = self.ref.time_baseline(*args)
        self.calls.append(("time_baseline", self.held, None))
        return out


def test_torch_compile_compiles_before_the_timing_lock_is_taken(tmp_path: Path) -> None:
    """The compile baseline's compilation (seconds of CPU work) runs outside the GPU's timing lock."""
    from cuda_agent.harness.baselines import measure_baseline
    from cuda_agent.harness.timing_protocol import TimingProtocol
    from cuda_agent.harness.timing_stats import TimingLock

    protocol = TimingProtocol(min_calls=5, max_calls=10, warmup_calls=1, max_batch_s=5.0)
    ref = _reference()
    try:
        ref.make_set(0, 123, None, "host", False)
        watch = _LockWatch(TimingLock("test-prepare", lock_dir=tmp_path), ref)
        timing = measure_baseline(watch, "compile", [0], protocol, "default", watch, "host_sync")
        assert timing.samples >= 5
        prepare = [c for c in watch.calls if c[0] == "prepare_baseline"]
        assert prepare == [("prepare_baseline", False, True)]  # compiled now, lock not held
        assert watch.calls[0][0] == "prepare_baseline"
        assert all(held for op, held, _ in watch.calls if op == "time_baseline")
        assert ref.prepare_baseline("compile", 0) is False  # compiled once per process
        assert ref.prepare_baseline("eager", 0) is False
    finally:
        ref.close()


def test_reference_warm_up_compiles_once_and_calls_from_threads_do_not_mix() -> None:
    import threading

    ref = _reference()
    try:
        assert ref.warm_baselines("default", True) is True  # compiled now
        assert ref.warm_baselines("default", True) is False  # kept for the process
        answers: list[object] = []

        def ask(n: int) -> None:
            for _ in range(n):
                answers.append(ref.threads())

        workers = [threading.Thread(target=ask, args=(40,)) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=120)
        assert answers == [1] * 120  # one request at a time on the pipe: every answer is the right one
    finally:
        ref.close()


def test_evaluator_prepare_warms_a_task_once_per_reference_process(make_evaluator, tmp_path: Path) -> None:
    from cuda_agent.harness.tasks import load_task_file

    task_file = tmp_path / "double.py"
    task_file.write_text(TASK)
    task = load_task_file(task_file, id="double")
    with make_evaluator(sandbox={"runners_ahead": 0}, timing={"compile_baseline": True}) as ev:
        assert ev.prepare(task) is True
        assert ev.prepare(task) is False
        assert ev.warm_reference(task).warm_baselines("default", True) is False  # compiled by prepare


def test_warm_compile_off_leaves_the_compile_to_the_first_grade(make_evaluator, tasks, make_ws, kit, honest_relu,
                                                                  tmp_path: Path) -> None:
    """``timing.warm_compile: false`` (training): the warm-up runs eager only, and the grade still compiles and times
    the torch.compile baseline, so the reward's compile milestone is measured all the same."""
    with make_evaluator(sandbox={"runners_ahead": 0},
                        timing={"compile_baseline": True, "warm_compile": False,
                                "baseline_cache_dir": tmp_path / "bl"}) as ev:
        assert ev.prepare(tasks.add_relu) is True  # warmed ...
        assert ev.warm_reference(tasks.add_relu).warm_baselines("default", True) is True  # ... but not compiled
        assert ev.prepare(tasks.relu) is True
        graded = ev.grade(tasks.relu, make_ws(honest_relu), kit)
        assert graded.status.value == "correct", graded.message
        assert graded.baselines is not None and graded.baselines.compile is not None
        assert graded.speedup_compile is not None and graded.speedup_compile > 0
        # The grade compiled it (outside the timing lock): the reference process has it now, and says so.
        assert ev.warm_reference(tasks.relu).warm_baselines("default", True) is False
        assert graded.diagnostics.baseline_host["compile"]["prepare_compiles"] >= 1
        # A second grade finds it compiled: nothing compiled inside its graded pass.
        again = ev.grade(tasks.relu, make_ws(honest_relu), kit)
        assert again.status.value == "correct", again.message
        assert again.diagnostics.baseline_host["compile"]["prepare_compiles"] == 0
        assert again.diagnostics.baseline_host["compile"]["calls"] >= again.baselines.compile.samples
