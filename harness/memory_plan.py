"""Each session of an evaluator sized to its device's memory budget (:mod:`~cuda_agent.harness.memory_budget`).

:class:`MemoryPlanner` is the evaluator's part that knows what a task occupies:

- its :class:`~cuda_agent.harness.memory_budget.Footprint` comes from the probed manifest (the shapes and dtypes of
  its inputs and outputs, its parameters) and the measured temporaries of its forward: a reference process's once one
  has run it, else the CUDA probe's (``meta['work_bytes']``, with a margin), else twice its largest input or output
  (a conservative guess that alone would call KernelBench's 16 GiB ``45_Average_Pooling_2D`` too large for an
  H200, whose pooling has almost no temporaries);
- a reference process holds its context and parameters in the budget from its start until it closes (a standing
  hold); when a reservation does not fit, idle warm processes are closed to make room;
- a session reserves everything else it will occupy (both sides' input sets, the runner's context and
  parameters, staged sets, temporaries) before it opens and gives it back when it ends, however it ends; its set
  plan says how many sets each side may hold;
- a warm-up of the baselines (outside any session: the eval scheduler warms tasks while candidates build)
  reserves one set's worth around itself;
- a session or warm-up that failed with an out-of-memory error of the harness's own (the reference process's) runs
  once more holding the whole budget but its reference process (:meth:`MemoryPlanner.alone`).

A task whose smallest plan does not fit the whole capacity raises
:class:`~cuda_agent.harness.memory_budget.TooLarge`; the session reports it as ``Status.too_large``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from cuda_agent.harness.memory_budget import (PROCESS_OVERHEAD, Footprint, MemoryBudget, SetPlan, budget_for,
                                              plan_sets)
from cuda_agent.schemas.task import TaskManifest, TensorSpec

#: Longest a session waits for memory other sessions hold before it fails (a harness error, named).
SESSION_WAIT_S = 1800.0
_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1,
                "float8_e5m2": 1}


def spec_bytes(spec: TensorSpec) -> int:
    """Bytes of one tensor spec (0 for non-tensors)."""
    if spec.kind != "tensor":
        return 0
    n = 1
    for d in spec.shape:
        n *= int(d)
    return n * _DTYPE_BYTES.get(spec.dtype or "float32", 4)


def task_footprint(task: TaskManifest, work_bytes: int | None = None) -> Footprint | None:
    """What one input set of ``task`` occupies, from its probed manifest; None when it was not probed."""
    if not task.inputs and not task.outputs:
        return None
    input_bytes = sum(spec_bytes(s) for s in task.inputs)
    output_bytes = sum(spec_bytes(s) for s in task.outputs)
    # The probe's bytes_moved is inputs + outputs + parameters and buffers.
    param_bytes = max(0, int(task.bytes_moved or 0) - input_bytes - output_bytes)
    if work_bytes is None:
        work_bytes = probed_work_bytes(task)
    work = work_bytes if work_bytes is not None else guessed_work_bytes(input_bytes, output_bytes)
    return Footprint(input_bytes=input_bytes, output_bytes=output_bytes, param_bytes=param_bytes, work_bytes=work)


def guessed_work_bytes(input_bytes: int, output_bytes: int) -> int:
    """A forward's temporaries before anything measured them: twice its largest input or output (conservative)."""
    return 2 * max(input_bytes, output_bytes)


#: Margin on the probe's measured temporaries: another process's forward may pick other library workspaces.
PROBED_WORK_MARGIN = 1.25
PROBED_WORK_FLOOR = 64 * 2**20


def probed_work_bytes(task: TaskManifest) -> int | None:
    """The forward's temporaries the probe measured on the device (``meta['work_bytes']``, CUDA probes), with a
    margin; None when it did not measure them (a CPU probe, a manifest from before the measurement)."""
    measured = task.meta.get("work_bytes")
    if not isinstance(measured, int) or isinstance(measured, bool) or measured < 0:
        return None
    return int(measured * PROBED_WORK_MARGIN) + PROBED_WORK_FLOOR


class MemoryPlanner:
    """Memory plans and reservations of one evaluator's sessions (see the module docstring).

    :param kind: 'cuda' or 'cpu'. :param device_index: the device. :param capacity_bytes: the budget's capacity
        (None: a share of what is free when it is made; evaluators with the same device and capacity share one).
    """

    def __init__(self, kind: str, device_index: int = 0, capacity_bytes: int | None = None) -> None:
        self.kind = kind
        self.budget: MemoryBudget = budget_for(kind, device_index, capacity_bytes)
        self._work: dict[str, int] = {}
        self._lock = threading.Lock()

    def footprint(self, task: TaskManifest) -> Footprint | None:
        """``task``'s footprint with the temporaries measured so far."""
        with self._lock:
            work = self._work.get(task.code_hash)
        return task_footprint(task, work)

    def note_work(self, task: TaskManifest, work_bytes: int) -> None:
        """A reference process measured ``work_bytes`` of temporaries in ``task``'s forward."""
        if work_bytes > 0:
            with self._lock:
                self._work[task.code_hash] = max(work_bytes, self._work.get(task.code_hash, 0))

    def process_bytes(self, task: TaskManifest) -> int:
        """What a reference process of ``task`` holds while it lives: its context and the model's parameters."""
        fp = self.footprint(task)
        return PROCESS_OVERHEAD.get(self.kind, PROCESS_OVERHEAD["cuda"]) + (fp.param_bytes if fp else 0)

    def hold_process(self, task: TaskManifest) -> Callable[[], None]:
        """A standing hold for a reference process of ``task``; returns what releases it (at the process's close)."""
        hid = self.budget.hold(self.process_bytes(task), f"reference process of {task.id}", force=True)
        return lambda: self.budget.release(hid)

    def plan(self, task: TaskManifest, *, wanted_sets: int, wanted_fresh: int) -> SetPlan | None:
        """The set plan of a session of ``task`` (None when the task was not probed: every set is held, as
        before sizes were known). Raises :class:`~cuda_agent.harness.memory_budget.TooLarge`."""
        fp = self.footprint(task)
        if fp is None:
            return None
        return plan_sets(fp, self.kind, self.budget.capacity, wanted_sets=wanted_sets, wanted_fresh=wanted_fresh)

    @contextmanager
    def session(self, task: TaskManifest, plan: SetPlan | None, *, exclusive: bool = False) -> Iterator[None]:
        """Reserve what a session with ``plan`` occupies beyond its reference process's standing hold, for the
        ``with`` block. ``exclusive``: hold the device alone instead (:meth:`alone`), the retry of a session that
        ran out of memory beside other work."""
        if exclusive:
            with self.alone(task, f"session of {task.id}"):
                yield
            return
        if plan is None:
            yield
            return
        nbytes = max(0, plan.reserved_bytes - self.process_bytes(task))
        with self.budget.reserve(nbytes, f"session of {task.id}", timeout_s=SESSION_WAIT_S):
            yield

    def alone(self, task: TaskManifest, what: str) -> contextlib.AbstractContextManager[int]:
        """The whole budget but ``task``'s reference process (its standing hold, taken when it starts) for the
        ``with`` block: ``what`` runs with the device to itself after an out-of-memory error of the harness's own
        (other work beside it, or the allocator's fragmentation, took more than was reserved). While it waits,
        ordinary reservations wait behind it."""
        return self.budget.reserve_exclusive(f"{what} alone (retry after an out-of-memory error)",
                                             keep=self.process_bytes(task), timeout_s=SESSION_WAIT_S)

    @contextmanager
    def warm_up(self, task: TaskManifest, *, exclusive: bool = False) -> Iterator[None]:
        """Reserve a baseline warm-up's inputs, outputs (eager and compiled) and temporaries for the block;
        ``exclusive``: the device alone (:meth:`alone`)."""
        if exclusive:
            with self.alone(task, f"baseline warm-up of {task.id}"):
                yield
            return
        fp = self.footprint(task)
        nbytes = 0 if fp is None else fp.input_bytes + 2 * fp.output_bytes + fp.work_bytes
        # An admission: a new task's first reservation waits behind a session that has waited long (fairness).
        with self.budget.reserve(min(nbytes, self.budget.capacity), f"baseline warm-up of {task.id}", admission=True):
            yield

    def on_pressure(self, callback: Callable[[int], int]) -> None:
        """Register what frees memory when a reservation does not fit (closing idle warm processes)."""
        self.budget.on_pressure.append(callback)

    def describe(self, plan: SetPlan, remade: int, peak_bytes: int | None, fp: Footprint,
                 exclusive: bool = False) -> dict[str, Any]:
        """The :class:`~cuda_agent.schemas.result.MemoryInfo` fields of a session (``exclusive``: it held the device
        alone, the retry after an out-of-memory error)."""
        return {"bytes_per_set": fp.set_bytes, "reference_sets": plan.reference_sets, "runner_sets": plan.runner_sets,
                "fresh_sets": plan.fresh_sets, "reserved_bytes": plan.reserved_bytes,
                "capacity_bytes": self.budget.capacity, "remade_sets": remade, "peak_bytes": peak_bytes,
                "exclusive_retry": exclusive}
