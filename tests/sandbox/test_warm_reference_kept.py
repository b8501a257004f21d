"""A reference process warmed for a task's session is the one that session uses, though the session's memory
reservation did not fit at first (real reference processes, real torch.compile on CPU).

On an H100, ``cuda-agent tasks check`` at concurrency 8 recorded ``baseline_prepare: {'compiles': 1}`` (about 1 s of
the device stage) for nearly every task after the first few. That was no TorchDynamo recompile: a session whose
reservation did not fit asked the pool to close idle processes, and the pool closed every idle one, the process
warmed for that very session included (a process is idle between its warm-up and its session), so the session
started a new process and its ``prepare`` compiled the model afresh.
"""

from __future__ import annotations

from cuda_agent.harness.memory_budget import MiB
from cuda_agent.schemas.task import TaskManifest, TensorSpec


def _probed(task: TaskManifest, inputs: list[list[int]], outputs: list[list[int]]) -> TaskManifest:
    """``task`` with the shapes a probe records (the memory budget sizes its sessions from them)."""
    def specs(prefix: str, shapes: list[list[int]]) -> list[TensorSpec]:
        return [TensorSpec(name=f"{prefix}{i}", shape=s, dtype="float32") for i, s in enumerate(shapes)]

    nbytes = sum(4 * a * b for a, b in inputs + outputs)
    return task.model_copy(update={"inputs": specs("input", inputs), "outputs": specs("output", outputs),
                                   "bytes_moved": float(nbytes)})


def test_a_session_keeps_the_process_warmed_for_it_when_its_reservation_must_make_room(make_evaluator, tasks) -> None:
    relu = _probed(tasks.relu, [[8, 256]], [[8, 256]])
    add_relu = _probed(tasks.add_relu, [[4, 128], [4, 128]], [[4, 128], [4, 128]])
    # Two warm processes (384 MiB each on CPU) leave 232 MiB; relu's session reserves about 384 MiB beyond its
    # process: it fits once one process is closed.
    with make_evaluator(sandbox={"runners_ahead": 0}, timing={"compile_baseline": True},
                        limits={"device_memory_gib": 1000 * MiB / 2**30}) as ev:
        # both compiled at their warm-ups; relu's is the latest warmed, the first to go were it not for its session
        assert ev.prepare(add_relu) is True and ev.prepare(relu) is True
        warmed = ev.warm_reference(relu)
        result = ev.self_check(relu)
        assert result.status.value == "correct", result.message
        assert ev.warm_reference(add_relu) is None  # the reservation made room: the other idle process went
        assert ev.warm_reference(relu) is warmed  # ... not the one warmed for this session
        prepare = result.diagnostics.baseline_host["compile"]
        assert prepare["prepare_compiles"] == 0, prepare  # no compile on the graded pass


SHAPE_BY_SEED = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    n = 4 if torch.initial_seed() == 0 else 6  # the warm-up's public seed (0) gives another shape than a held set's
    return [torch.randn(n, 8)]


def get_init_inputs():
    return []
"""


def test_prepare_tells_a_recompile_and_its_failed_guard_from_a_process_that_never_compiled(capfd) -> None:
    """``prepare_cold``: a process whose warm-up never ran compiles for the first time (no recompile);
    ``prepare_guard_failures`` and a line on the reference's stderr: a recompile after the warm-up, with the guard
    that failed."""
    from cuda_agent.harness.reference_client import ReferenceClient

    warm, cold = ReferenceClient("cpu", threads=1), ReferenceClient("cpu", threads=1)
    try:
        warm.start(SHAPE_BY_SEED)
        cold.start(SHAPE_BY_SEED)
        assert warm.warm_baselines("default", True) is True  # compiled on the 4-row warm-up inputs
        for ref in (warm, cold):
            ref.make_set(0, 12345, None, "host", False)  # 6 rows
            ref.baseline_host_stats(take=True)
        assert warm.prepare_baseline("compile", 0) is False  # not its first compile ...
        again = warm.baseline_host_stats(take=True)["compile"]
        assert again["prepare_compiles"] >= 1 and again["prepare_guard_failures"] >= 1, again  # ... a recompile
        assert "prepare_cold" not in again
        assert "the compile baseline compiled again on set 0; guard failures: forward: " in capfd.readouterr().err
        assert cold.prepare_baseline("compile", 0) is True  # its first compile: no warm-up ran in this process
        first = cold.baseline_host_stats(take=True)["compile"]
        assert first["prepare_cold"] == 1 and first["prepare_compiles"] >= 1 and "prepare_guard_failures" not in first
    finally:
        warm.close()
        cold.close()
