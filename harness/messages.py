"""Typed messages of the candidate runner, and the pieces both child processes' messages share.

The wire format is :mod:`cuda_agent.harness.wire`; the reference process's messages are in
:mod:`cuda_agent.harness.reference_messages`.

Candidate runner (sandboxed; :mod:`cuda_agent.harness.candidate_runner`, parent side
:class:`~cuda_agent.harness.runner_client.RunnerClient`): ``setup`` (device and timing protocol, answered by
``ready`` once torch and the device are up), ``load``, ``inputs``, ``call``, ``export``, ``guard``, ``kernels``,
``calibrate``, ``exit``. Replies from the runner come from the candidate's process: they are validated here and
believed only as far as the trusted side's own checks back them up.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from cuda_agent.harness.wire import Message, Reply, Request
from cuda_agent.schemas.result import SpinCalibration, StartPhase

Transport = Literal["ipc", "host", "vmm"]


# ---------------------------------------------------------------------------- shared pieces
class TimerSpec(Message):
    """The per-process part of the timing protocol, the same in the runner and the reference process
    (:class:`~cuda_agent.harness.device_timer.DeviceTimer`); the candidate's calls are never retaken."""

    preroll_us: float = Field(0.0, ge=0, description="GPU spin before each timed call (CUDA), microseconds.")
    preroll_retakes: int = Field(0, ge=0, description="Retakes of a baseline call whose host side outlasted the spin.")
    preroll_max_us: float = Field(500_000.0, ge=0, description="The longest spin a retake or an adaptive spin uses, "
                                  "microseconds (it covers the longest host enqueue seen on KernelBench level 3, 186 ms, "
                                  "with the 1.5 margin and room for a loaded host).")
    l2_flush_multiple: float = Field(2.0, ge=1, description="L2 flush buffer size in multiples of the L2.")
    warm_input_pages: bool = Field(False, description="Touch every 2 MiB page of the inputs after the flush (CUDA).")
    candidate_spin_window: int = Field(
        4, ge=0, description="CUDA, with a spin: the candidate's spin follows the longest host enqueue of its last N "
        "calls (1.5x, between preroll_us and preroll_max_us), as a baseline's retakes cover its host path; 0 keeps "
        "the candidate's spin fixed at preroll_us (its host time past the spin then counts in its time).")
    baseline_spin_window: int = Field(
        4, ge=0, description="CUDA, with a spin: a baseline's first take follows the longest host enqueue of its last N "
        "calls the same way, and only a take that outlasts it is retaken; 0 starts every call at preroll_us (a "
        "launch-bound model's calls are then all retaken).")


class TensorDesc(Message):
    """One input of a set as handed over: a value inline, or a tensor's layout plus where its bytes are."""

    kind: Literal["tensor", "value"]
    value: Any = None
    dtype: str | None = None
    shape: list[int] = Field(default_factory=list)
    stride: list[int] = Field(default_factory=list)
    ipc: str | None = Field(None, description="CUDA IPC reduction arguments, pickled, base64 (trusted -> candidate).")
    file: str | None = Field(None, description="A staged file in the exchange folder.")
    fd: int | None = Field(None, description="Index into the descriptors that came with the message.")
    nbytes: int | None = None
    vmm: bool = Field(False, description="The descriptor is an exported device allocation (else a memory file).")
    alloc: int | None = Field(None, description="Size of that device allocation.")


class OutputSpec(Message):
    """One output of the reference: a tensor's dtype and shape, or the Python type of another value."""

    dtype: str | None = None
    shape: list[int] | None = None
    kind: str | None = None


class Violation(Message):
    """An integrity rule a check found broken (rule id, message, where)."""

    rule: str
    message: str
    file: str | None = None
    line: int | None = None


class OutputMeta(Message):
    """What the runner saw of one output of the candidate's forward (checked by the trusted side)."""

    type: str
    exact_tensor: bool = False
    dtype: str | None = None
    shape: list[int] | None = None
    stride: list[int] | None = None
    device: str | None = None
    contiguous: bool | None = None
    nbytes: int | None = None
    alias_input: bool = False
    requires_grad: bool = False
    fingerprint: str | None = None


class ExportedOutput(Message):
    """Where one exported output is: a slot file, CUDA IPC arguments, or a device allocation sent by descriptor."""

    file: str | None = None
    ipc: list[Any] | None = None
    vmm: bool = False
    nbytes: int | None = None
    alloc: int | None = None


# ---------------------------------------------------------------------------- candidate runner
class Ready(Reply):
    """The runner imported torch, initialised the device and took its guard snapshot."""

    pid: int
    threads: int
    spin: SpinCalibration
    ready_clock: float | None = None  # its time.monotonic() when ready (CLOCK_MONOTONIC: one clock per machine)
    start_phases: dict[str, StartPhase] = Field(
        default_factory=dict, description="Wall and CPU seconds of each phase of its start, in order, from its spawn "
                                          "('interpreter', when the setup said when) to ready.")
    start_cpu_s: float | None = Field(None, description="Its CPU seconds when ready (time.process_time), interpreter "
                                                        "start and imports before main() included.")
    timing_state: dict[str, Any] = Field(
        default_factory=dict, description="Its timing state when ready, after the op audit's warm-up and before any "
        "candidate code (harness/timing_env.py process_timing_state): what the reference process's must match.")


class Setup(Request):
    """The runner's device and timing protocol (sent as it starts; answered by :class:`Ready`)."""

    op: ClassVar[str] = "setup"
    Reply: ClassVar[type[Reply]] = Ready
    device: str
    timer: TimerSpec = Field(default_factory=TimerSpec)
    #: ``"module:Class"`` of the backend's RunnerLoader (harness/device_adapter.py); None = ``cuda_extension``.
    loader: str | None = None
    spawn_clock: float | None = Field(None, description="The parent's time.monotonic() when it spawned the runner: the "
                                                        "'interpreter' phase of its start is measured from it.")


class SeededSet(Message):
    """A set the runner made from its seed: the fingerprints of its inputs, or why it could not."""

    fingerprints: list[str | None] | None = None
    error: str | None = None


class Loaded(Reply):
    """The candidate's module and model are loaded; what the guard saw meanwhile."""

    violations: list[Violation] = Field(default_factory=list)
    seeded: dict[str, SeededSet] = Field(default_factory=dict)


class Load(Request):
    """Make the seeded sets (before any candidate code), then import the extension and ``model_new.py``."""

    op: ClassVar[str] = "load"
    Reply: ClassVar[type[Reply]] = Loaded
    workspace: str
    so_dir: str
    require_extension: bool = True
    init_inputs: list[Any] = Field(default_factory=list)
    init_seed: int = 42
    exchange: str
    output_specs: list[OutputSpec] = Field(default_factory=list)
    task_code: str | None = None
    seeded_sets: dict[str, int] = Field(default_factory=dict)
    #: The suite self-check (never a grade): the task's own Model is the candidate, so the runtime rules against
    #: PyTorch compute (op audit, foreign kernels) are not applied. Every other rule is.
    torch_compute_allowed: bool = False


class Received(Reply):
    """The runner holds input set ``set``."""

    set: int


class Inputs(Request):
    """Input set ``set``; tensors by file, IPC handle, or descriptors sent just before the request."""

    op: ClassVar[str] = "inputs"
    Reply: ClassVar[type[Reply]] = Received
    set: int
    tensors: list[TensorDesc]


class InputsDropped(Reply):
    """The runner no longer holds these sets."""

    sets: list[int]


class DropInputs(Request):
    """Forget input sets ``sets`` (memory: the trusted side hands a set over again when a call needs it)."""

    op: ClassVar[str] = "drop_inputs"
    Reply: ClassVar[type[Reply]] = InputsDropped
    sets: list[int]


class Called(Reply):
    """One timed forward: its time, what its outputs are, its inputs' fingerprints afterwards."""

    ms: float
    host_ms: float
    enqueue_ms: float | None = Field(None, description="CUDA: host ms from the spin's launch to the end event.")
    spin_us: float | None = Field(None, description="CUDA: the spin the call was timed behind, microseconds.")
    spin_blocked: bool = Field(False, description="Timed behind the base spin as a call whose host waits for the "
                               "device (harness/spin_policy.py).")
    outputs: list[OutputMeta]
    input_fingerprints: list[str | None]
    ops: list[str] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list)
    threads: int = -1
    #: The runner's own wall milliseconds per part of this call ('copy_inputs', 'poison', 'timed' (the timing
    #: protocol's take: flush, spin, the forward, the sync), 'outputs' (describing and fingerprinting them, and
    #: the op audit's findings on an audited call), 'input_fingerprints'): where a call's cost goes besides the
    #: forward (Diagnostics.call_work_s).
    work_ms: dict[str, float] = Field(default_factory=dict)
    #: With ``Call.state``: each part of the module's state and its fingerprint after the call
    #: (harness/module_state.py).
    state: dict[str, str] | None = None


class Call(Request):
    """One forward on a copy of set ``set`` under the timing protocol (``audit``: under the op audit)."""

    op: ClassVar[str] = "call"
    Reply: ClassVar[type[Reply]] = Called
    set: int
    audit: bool = False
    flush: bool = True
    #: Digest the module's state after the call (harness/module_state.py).
    state: bool = False


class Exported(Reply):
    """Where the last call's outputs are now (device allocations' descriptors came before this reply)."""

    outputs: list[ExportedOutput | None]
    vmm_error: str | None = None


class Export(Request):
    """Hand the last outputs over by ``transport``."""

    op: ClassVar[str] = "export"
    Reply: ClassVar[type[Reply]] = Exported
    transport: Transport = "ipc"


class Guarded(Reply):
    """The guard's violations since its snapshot."""

    violations: list[Violation] = Field(default_factory=list)
    threads: int = -1
    #: The runner's peak device memory through torch's allocator (CUDA; a diagnostic, never a verdict).
    peak_bytes: int | None = None


class Guard(Request):
    """Compare the guard snapshot taken before load with now."""

    op: ClassVar[str] = "guard"
    Reply: ClassVar[type[Reply]] = Guarded


class KernelTimes(Reply):
    """A per-kernel breakdown and/or the profiler-sum time of one call."""

    violations: list[Violation] = Field(default_factory=list)
    per_kernel: list[dict[str, Any]] | None = None
    profiler_sum_ms: float | None = None


class Kernels(Request):
    """Profile one call on set ``set`` (``breakdown``: per kernel; ``profiler_sum``: the release's method)."""

    op: ClassVar[str] = "kernels"
    Reply: ClassVar[type[Reply]] = KernelTimes
    set: int
    breakdown: bool = False
    profiler_sum: bool = False


class Calibrated(Reply):
    """The protocol's own cost per call in this runner, and how its spin was sized again."""

    overhead_ms: float
    spin: SpinCalibration


class Calibrate(Request):
    """Measure the protocol's cost per call (null calls) before the candidate is loaded."""

    op: ClassVar[str] = "calibrate"
    Reply: ClassVar[type[Reply]] = Calibrated


class Exit(Request):
    """End the runner (no reply)."""

    op: ClassVar[str] = "exit"


RUNNER_REQUESTS: dict[str, type[Request]] = {
    cls.op: cls for cls in (Setup, Load, Inputs, DropInputs, Call, Export, Guard, Kernels, Calibrate, Exit)
}
