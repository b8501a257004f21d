"""An out-of-memory error of the harness's own runs the session again holding the device alone (real processes,
CPU backend).

Seen on an H100 (a KernelBench self-check with concurrency): sessions the memory budget had admitted failed with
``reference process (make_set): OutOfMemoryError: CUDA out of memory``, because work beside them and the allocator's
fragmentation took more than was reserved; the same problems failed again on a second run, beside other sessions
again. The tasks here raise that error in their reference process's forward (only there: the probe and the runner
run the same forward without it), counting each one in a file named in their source.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.harness.tasks import load_task_code
from cuda_agent.schemas.result import Status

from tests.sandbox.conftest import HONEST_RELU_MODEL_NEW

#: The budget of this file's evaluator: a capacity no other test uses, so its counter is this file's alone.
BUDGET_GIB = 3.75


def oom_task(state: Path, fails: int) -> str:
    """A ReLU task whose reference forward raises torch's out-of-memory error the first ``fails`` times it runs in a
    reference process (-1: every time); ``state`` counts those failures."""
    return textwrap.dedent(
        f"""
        import os

        import torch
        import torch.nn as nn

        STATE = {str(state)!r}
        FAILS = {fails}


        class Model(nn.Module):
            def forward(self, x):
                if os.environ.get("CUDA_AGENT_REFERENCE_CHANNEL"):  # a reference process (not the probe, the runner)
                    failed = int(open(STATE).read() or 0) if os.path.exists(STATE) else 0
                    if FAILS < 0 or failed < FAILS:
                        with open(STATE, "w") as fh:
                            fh.write(str(failed + 1))
                        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
                return torch.relu(x)


        def get_inputs():
            return [torch.randn(8, 256)]


        def get_init_inputs():
            return []
        """
    )


def failures(state: Path) -> int:
    """Out-of-memory errors the reference processes raised so far."""
    return int(state.read_text() or 0) if state.exists() else 0


@pytest.fixture(scope="module")
def oom_evaluator(make_evaluator) -> Iterator[object]:  # type: ignore[no-untyped-def]
    ev = make_evaluator(limits={"device_memory_gib": BUDGET_GIB}, verify={"input_sets": 2})
    yield ev
    ev.close()


@pytest.fixture
def make_task(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``make(name, fails) -> (manifest, code, state)``: a probed out-of-memory task (its own reference process)."""

    def make(name: str, fails: int):  # type: ignore[no-untyped-def]
        state = tmp_path / f"{name}.failures"
        code = oom_task(state, fails)
        task = load_task_code(code, f"tests/{name}", device="cpu", isolation="process")
        assert failures(state) == 0  # the probe ran the forward without the error
        return task, code, state

    return make


def test_a_reference_out_of_memory_runs_the_session_again_alone_and_an_honest_candidate_passes(
        oom_evaluator, make_task, make_ws, kit) -> None:  # type: ignore[no-untyped-def]
    task, code, state = make_task("oom_once", 1)
    budget = oom_evaluator.memory.budget
    before = budget.exclusive_holds
    r = oom_evaluator.verify(task, make_ws(HONEST_RELU_MODEL_NEW, code), kit)
    assert r.status is Status.correct, r.summary_for_agent()
    assert failures(state) == 1  # the first session's make_set failed; the retry's did not
    assert r.diagnostics.memory is not None and r.diagnostics.memory.exclusive_retry
    assert budget.exclusive_holds == before + 1
    oom_evaluator.wait_cleanups()
    assert budget.reserved < budget.capacity // 2  # the device alone was given back with the session's cleanup
    # The next session of the task runs beside others as usual.
    again = oom_evaluator.verify(task, make_ws(HONEST_RELU_MODEL_NEW, code), kit)
    assert again.status is Status.correct and not again.diagnostics.memory.exclusive_retry
    assert budget.exclusive_holds == before + 1


def test_a_reference_that_always_runs_out_of_memory_is_an_error_after_exactly_one_retry(
        oom_evaluator, make_task, make_ws, kit) -> None:  # type: ignore[no-untyped-def]
    task, code, state = make_task("oom_always", -1)
    budget = oom_evaluator.memory.budget
    before = budget.exclusive_holds
    r = oom_evaluator.verify(task, make_ws(HONEST_RELU_MODEL_NEW, code), kit)
    assert r.status is Status.error
    assert "harness reference failed" in r.message and "OutOfMemoryError: CUDA out of memory" in r.message
    assert "held alone" in r.message
    assert failures(state) == 2  # the session and its one retry
    assert budget.exclusive_holds == before + 1
    assert r.diagnostics.memory is not None and r.diagnostics.memory.exclusive_retry


def test_a_candidates_own_out_of_memory_is_never_retried(oom_evaluator, make_task, make_ws, kit) -> None:  # type: ignore[no-untyped-def]
    task, code, state = make_task("oom_never", 0)
    budget = oom_evaluator.memory.budget
    before = budget.exclusive_holds
    candidate = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
"""
    r = oom_evaluator.verify(task, make_ws(candidate, code), kit)
    assert r.status is Status.error and "OutOfMemoryError" in (r.message + r.diagnostics.traceback)
    assert budget.exclusive_holds == before
    assert r.diagnostics.memory is not None and not r.diagnostics.memory.exclusive_retry
    assert failures(state) == 0


def test_a_baseline_warm_up_that_runs_out_of_memory_is_warmed_again_alone(oom_evaluator, make_task) -> None:  # type: ignore[no-untyped-def]
    task, _code, state = make_task("oom_warm_up", 1)
    budget = oom_evaluator.memory.budget
    before = budget.exclusive_holds
    assert oom_evaluator.prepare(task) is True
    assert failures(state) == 1  # the first warm-up's forward
    assert budget.exclusive_holds == before + 1
    ref = oom_evaluator.warm_reference(task)
    assert ref is not None and ref.warmed
    assert oom_evaluator.prepare(task) is False  # warmed: nothing to do, nothing held alone
    assert budget.exclusive_holds == before + 1


@pytest.mark.slow
def test_the_self_check_row_of_a_task_that_ran_alone_says_so(oom_evaluator, make_task, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``cuda-agent tasks check``: the graded pass of a task that needed the device alone is correct, and its row
    (and report.md) names the retry, so a reader sees which tasks needed the device to themselves."""
    from cuda_agent.harness.suite_check import EXCLUSIVE_NOTE, row_from_result
    from cuda_agent.harness.suite_report import write_report

    task, _code, state = make_task("oom_self_check", 1)
    r = oom_evaluator.self_check(task)
    assert r.status is Status.correct, r.summary_for_agent()
    assert failures(state) == 1 and r.diagnostics.memory.exclusive_retry
    row = row_from_result(task, r, 1.0)
    assert row.exclusive_retry and row.note.startswith(EXCLUSIVE_NOTE)
    report = write_report(tmp_path, [row], planned=1, backend="cpu", tasks_spec="tests")
    assert report["summary"]["ran_alone"] == [task.id]
    assert f"| {task.id} | correct (alone) |" in (tmp_path / "report.md").read_text()
