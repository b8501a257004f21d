"""Typed messages of the trusted reference process (the wire format is :mod:`cuda_agent.harness.wire`).

The process is :mod:`cuda_agent.harness.reference`, its parent-side client
:class:`~cuda_agent.harness.reference_client.ReferenceClient`. Requests: ``start`` (its task and timing protocol),
``make_set``, ``stage_set``, ``stage_fds``, ``drop_sets``, ``inputs_intact``, ``check``, ``prepare_baseline``,
``warm_baselines``, ``time_baseline``, ``baseline_host_stats``, ``profiler_sum``, ``threads``, ``stop``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from cuda_agent.harness.messages import (ExportedOutput, OutputMeta, OutputSpec, TensorDesc, TimerSpec, Transport,
                                         Violation)
from cuda_agent.harness.wire import Reply, Request
from cuda_agent.schemas.result import CheckError


class Started(Reply):
    """The reference process built its task's model."""

    init_inputs: list[Any]
    #: The precision flags the reference and its baselines run with (TF32, cuDNN), recorded with every baseline.
    backend_flags: dict[str, Any] = Field(default_factory=dict)


class Start(Request):
    """The task a (possibly spare) reference process serves, and how it times baselines."""

    op: ClassVar[str] = "start"
    Reply: ClassVar[type[Reply]] = Started
    code: str
    device: str
    init_seed: int = 42
    threads: int | None = None
    timer: TimerSpec = Field(default_factory=TimerSpec)
    clone_inputs: bool = False
    net_overhead: bool = False
    #: The device's timing lock file, held shared while the model is built on the device (its parameters'
    #: initialisation runs kernels); None where the caller holds that lock already or has none.
    lock_path: str | None = None


class MadeSet(Reply):
    """An input set made from its seed, its reference outputs computed and kept in the reference process."""

    set: int
    tensors: list[TensorDesc]
    input_fingerprints: list[str | None]
    outputs: list[OutputSpec]
    input_bytes: int
    #: Peak device bytes of the reference forward beyond its inputs and outputs (CUDA; 0 elsewhere).
    work_bytes: int = 0
    #: A widened set (``MakeSet.widen``): the share of the full widening whose reference output was finite;
    #: None for an ordinary set. A widened set that is not finite at any widening is not made (``inconclusive``).
    widen_shrink: float | None = None
    inconclusive: bool = False
    #: Why widenings tried were too sensitive to grade on (harness/widening_gate.py), in the order tried.
    gate_notes: list[str] = Field(default_factory=list)


class MakeSet(Request):
    """Make input set ``set`` from ``seed``; ``stage``: hand it over now by ``transport`` (else layout only)."""

    op: ClassVar[str] = "make_set"
    Reply: ClassVar[type[Reply]] = MadeSet
    set: int
    seed: int
    exchange: str | None
    transport: Transport = "ipc"
    stage: bool = True
    #: Widen the set's floating inputs within their domains (harness/widening.py plans, one per input).
    widen: list[Any] | None = None
    #: (atol, rtol) of the sensitivity gate of a widened set (None: not gated).
    gate: list[float] | None = None
    #: Make a widened set at this share of its widening only (a set made again: no back-off, no gate).
    shrink: float | None = None


class StagedSet(Reply):
    """Where the tensors of a set staged after all are."""

    tensors: list[TensorDesc]


class StageSet(Request):
    """Hand set ``set`` over by ``transport``; ``reuse``: through the exchange folder's reusable slot files."""

    op: ClassVar[str] = "stage_set"
    Reply: ClassVar[type[Reply]] = StagedSet
    set: int
    exchange: str | None
    transport: Transport = "ipc"
    reuse: bool = False


class StagedFds(Reply):
    """A set staged in memory files or device allocations; ``fds`` descriptors came before this reply."""

    tensors: list[TensorDesc]
    fds: int
    vmm_error: str | None = None


class StageFds(Request):
    """Stage set ``set`` where nothing can see it until its descriptors are handed over."""

    op: ClassVar[str] = "stage_fds"
    Reply: ClassVar[type[Reply]] = StagedFds
    set: int
    vmm: bool = False


class Dropped(Reply):
    """Device bytes still allocated beyond the model after the drop (a leak probe)."""

    pinned_bytes: int
    #: Dropped sets whose pristine inputs had changed (checked before they were freed: T5).
    changed: list[int] = Field(default_factory=list)
    #: Peak device bytes this process allocated since the last drop (CUDA; None elsewhere).
    peak_bytes: int | None = None


class DropSets(Request):
    """Free input sets no longer needed."""

    op: ClassVar[str] = "drop_sets"
    Reply: ClassVar[type[Reply]] = Dropped
    sets: list[int]


class ExportsReleased(Reply):
    """What a release of export allocations freed."""

    #: Device allocations freed, and their bytes.
    released: int
    released_bytes: int


class ReleaseExports(Request):
    """Free the device allocations sets were exported in for hand-overs the runner has since dropped (the sets
    themselves stay held): a runner's dropped copy must not live on in the reference, outside the memory plan."""

    op: ClassVar[str] = "release_exports"
    Reply: ClassVar[type[Reply]] = ExportsReleased
    sets: list[int]


class Intact(Reply):
    """Sets whose pristine inputs changed since they were made."""

    changed: list[int]


class InputsIntact(Request):
    """Re-fingerprint every held set's pristine inputs (T5)."""

    op: ClassVar[str] = "inputs_intact"
    Reply: ClassVar[type[Reply]] = Intact


class Verdict(Reply):
    """The reference's comparison of one call's outputs (``transport_failed``: the hand-over itself failed)."""

    errors: list[CheckError] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list)
    transport_failed: str | None = None
    #: The measured noise floor of each output it was measured for (harness/noise_floor.py), by position.
    noise_floors: dict[str, float] = Field(default_factory=dict)


class Check(Request):
    """Compare the exported outputs of a call on set ``set`` (device allocations' descriptors come before it)."""

    op: ClassVar[str] = "check"
    Reply: ClassVar[type[Reply]] = Verdict
    set: int
    outputs: list[ExportedOutput | None]
    metas: list[OutputMeta]
    tolerances: dict[str, tuple[float, float]]


class Compiled(Reply):
    """Whether this request compiled the torch.compile baseline (its first call in the process)."""

    compiled: bool


class PrepareBaseline(Request):
    """One untimed baseline call on set ``set`` (torch.compile compiles now, outside any lock)."""

    op: ClassVar[str] = "prepare_baseline"
    Reply: ClassVar[type[Reply]] = Compiled
    which: Literal["eager", "compile"]
    set: int
    compile_mode: str = "default"


class WarmBaselines(Request):
    """Run the baselines once on inputs from a public seed (imports, kernels, compilation happen now)."""

    op: ClassVar[str] = "warm_baselines"
    Reply: ClassVar[type[Reply]] = Compiled
    compile_mode: str = "default"
    with_compile: bool = True
    #: The device's timing lock file, held shared around the warm-up's device work (released while torch.compile
    #: compiles); None where the caller already holds that lock (its hold covers the warm-up) or has none.
    lock_path: str | None = None


class Samples(Reply):
    """Per-call milliseconds."""

    ms: list[float]


class TimeBaseline(Request):
    """Time the eager or compiled reference over rotated sets with the candidate's protocol."""

    op: ClassVar[str] = "time_baseline"
    Reply: ClassVar[type[Reply]] = Samples
    which: Literal["eager", "compile"]
    sets: list[int]
    calls: int
    warmup: int
    compile_mode: str = "default"


class HostStats(Reply):
    """Per baseline kind: timed calls, calls whose host enqueue outlasted the spin, retakes, longest enqueue."""

    stats: dict[str, dict[str, float]]


class BaselineHostStats(Request):
    """The host statistics of every baseline timed in this process (since the last take, with ``take``)."""

    op: ClassVar[str] = "baseline_host_stats"
    Reply: ClassVar[type[Reply]] = HostStats
    #: Reset the statistics after reading them (a grade reads its own batches: take at its start and its end).
    take: bool = False


class Millis(Reply):
    """One time in milliseconds."""

    ms: float


class ProfilerSum(Request):
    """The release's profiler-sum time of a baseline on set ``set``."""

    op: ClassVar[str] = "profiler_sum"
    Reply: ClassVar[type[Reply]] = Millis
    which: Literal["eager", "compile"]
    set: int
    compile_mode: str = "default"


class ThreadCount(Reply):
    """torch's intra-op threads in the process, and its timing state (what the runner's must match)."""

    threads: int
    timing_state: dict[str, Any] = Field(default_factory=dict, description="harness/timing_env.py "
                                         "process_timing_state: environment, profiler, collector, threads.")


class Threads(Request):
    """How many intra-op threads the process runs with."""

    op: ClassVar[str] = "threads"
    Reply: ClassVar[type[Reply]] = ThreadCount


class Stopping(Reply):
    """The process heard the stop request and is exiting."""


class Stop(Request):
    """Exit (a spare that never got a task, or a process being closed)."""

    op: ClassVar[str] = "stop"
    Reply: ClassVar[type[Reply]] = Stopping


REFERENCE_REQUESTS: dict[str, type[Request]] = {
    cls.op: cls for cls in (Start, MakeSet, StageSet, StageFds, DropSets, ReleaseExports, InputsIntact, Check,
                            PrepareBaseline,
                            WarmBaselines, TimeBaseline, BaselineHostStats, ProfilerSum, Threads, Stop)
}
