"""Device slots, the CPU build pool and the GPU queue behind each device's timing lock.

One backend per device slot; an episode is placed on the least-loaded slot
(fewest episodes in flight, then fewest placed so far: round-robin on ties)
and talks to it through :class:`ScheduledBackend`, which

- runs ``compile`` inside the shared build pool (``build_workers`` at once),
- splits ``verify``/``profile``/``grade`` of a backend implementing
  :class:`cuda_agent.protocols.SplitBackend` (``build_for`` / ``evaluate_built``) into the build (in the build pool: grade's rebuild from
  scratch and verify's incremental rebuild need no device) and the device
  step, which alone holds the slot's timing lock, so nothing else runs on that
  device during a timed call (the GPU queue); a
  :class:`~cuda_agent.protocols.WarmableBackend`'s ``warm(task)`` (start the task's reference process, compile its
  torch.compile baseline: seconds of host work) runs on a thread while the
  candidate builds, and from ``prepare_workspace`` on while the policy writes
  its first kernel, and has finished before the lock is taken,
- accounts build seconds, queue waits and lock-held seconds per episode and
  per device (GPU-queue utilisation in the report).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from cuda_agent.protocols import SplitBackend, WarmableBackend
from cuda_agent.schemas.result import CandidateResult, Diagnostics, StartPhase
from cuda_agent.schemas.task import TaskManifest

log = structlog.get_logger(__name__)


@dataclass
class EpisodeUsage:
    """What one episode used of the shared resources."""

    build_s: float = 0.0
    build_wait_s: float = 0.0
    warm_wait_s: float = 0.0
    gpu_busy_s: float = 0.0
    gpu_wait_s: float = 0.0
    device_phase_s: dict[str, float] = field(default_factory=dict)
    runner_start_s: list[float] = field(default_factory=list)  # spawn-to-ready seconds of the runners it used
    runner_start_phases: list[dict[str, StartPhase]] = field(default_factory=list)  # where each of those starts went
    runner_start_cpu_s: list[float] = field(default_factory=list)  # CPU seconds of each of those runners when ready

    def add_runner_start(self, diagnostics: Diagnostics) -> None:
        """Add the start of a device step's runner (``Diagnostics.runner_start_*``), when the step had one."""
        if diagnostics.runner_start_s is None:
            return
        self.runner_start_s.append(diagnostics.runner_start_s)
        if diagnostics.runner_start_phases:
            self.runner_start_phases.append(dict(diagnostics.runner_start_phases))
        if diagnostics.runner_start_cpu_s is not None:
            self.runner_start_cpu_s.append(diagnostics.runner_start_cpu_s)

    def add_phases(self, phase_s: dict[str, float]) -> None:
        """Add a device step's evaluator sub-phases (``Diagnostics.phase_s``) to the episode's sums."""
        for name, seconds in phase_s.items():
            self.device_phase_s[name] = self.device_phase_s.get(name, 0.0) + float(seconds)


class StepGate:
    """At most ``places`` holders at once (``with gate:``); :meth:`locked` says whether every place is taken.

    A holder that has to wait for something other than the device (room in the memory budget, a process to start)
    lets its place go for that wait with :func:`released_step_places`, so another step can use the device meanwhile;
    a place is taken again after the wait (waiting for one like any newcomer)."""

    def __init__(self, places: int = 1) -> None:
        if places < 1:
            raise ValueError(f"a step gate needs at least one place, got {places}")
        self.places = places
        self.held = 0
        self._cond = threading.Condition()

    def _take(self) -> None:
        with self._cond:
            while self.held >= self.places:
                self._cond.wait()
            self.held += 1

    def _give(self) -> None:
        with self._cond:
            self.held -= 1
            self._cond.notify()

    def __enter__(self) -> StepGate:
        self._take()
        _held_gates().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gates = _held_gates()
        gates.reverse()
        gates.remove(self)  # the innermost hold of this gate
        gates.reverse()
        self._give()

    def locked(self) -> bool:
        """Whether a new holder would wait now."""
        with self._cond:
            return self.held >= self.places


_STEPS = threading.local()


def _held_gates() -> list[StepGate]:
    """The step gates this thread holds a place in, outermost first."""
    gates: list[StepGate] | None = getattr(_STEPS, "gates", None)
    if gates is None:
        gates = _STEPS.gates = []
    return gates


@contextmanager
def released_step_places() -> Iterator[None]:
    """Let go of every step-gate place this thread holds for the block, then take them again (outermost first):
    around a wait that needs no device (room in the memory budget, a runner or reference process starting), so a
    step that waits does not keep another step off the device. Nothing where the thread holds no place, and
    nothing where it still holds a timing lock (e.g. a machine-wide lock of another device key than the one it let
    go): a step holding the place while it waits for the exclusive mode would then wait on this thread's shared
    hold while this thread waits for the place (a deadlock seen in CI with two CPU slots)."""
    from cuda_agent.harness.device_lock import holds_any

    held = [] if holds_any() else list(_held_gates())
    for gate in reversed(held):
        gate._give()
    try:
        yield
    finally:
        for gate in held:
            gate._take()


@dataclass
class DeviceSlot:
    """One device: its backend, the gate of this process's device steps on it (``device_steps`` at once), and
    counters."""

    index: int
    backend: Any
    lock: StepGate = field(default_factory=StepGate)
    in_flight: int = 0
    placed: int = 0
    busy_s: float = 0.0  # summed over device steps: above wall time when device_steps > 1 overlap them
    wait_s: float = 0.0
    calls: int = 0
    phase_s: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Counters for the session record."""
        return {"index": self.index, "busy_s": self.busy_s, "wait_s": self.wait_s, "calls": self.calls,
                "episodes": self.placed}

    def top_phases(self, n: int = 6) -> dict[str, float]:
        """The ``n`` evaluator sub-phases that took the most of this slot's device steps, in seconds."""
        top = sorted(self.phase_s.items(), key=lambda kv: -kv[1])[:n]
        return {name: round(seconds, 1) for name, seconds in top}


def _machine_lock(slot: DeviceSlot) -> Any:
    """The shared mode of the machine-wide lock of ``slot``'s device, for a backend whose evaluator times under
    :func:`~cuda_agent.harness.device_lock.device_timing_lock` (its ``kind``); nothing otherwise."""
    kind = getattr(slot.backend, "kind", None)
    if kind not in ("cuda", "cpu"):
        return contextlib.nullcontext()
    from cuda_agent.harness.device_lock import device_timing_lock

    return device_timing_lock(kind, slot.index if kind == "cuda" else 0).shared()


class DevicePool:
    """Device slots plus the build pool; thread-safe."""

    def __init__(self, backends: dict[int, Any], build_workers: int, device_steps: int = 1) -> None:
        """:param backends: one backend per device slot. :param build_workers: compiles at once (the build pool).
        :param device_steps: device steps of this process at once per slot. Each holds the device's machine lock
        in the shared mode and a timed batch inside one takes it exclusively, so timing stays alone whatever this
        is; more than 1 overlaps the untimed work of several steps (runner start-up, set making, checks), each
        inside the evaluator's memory budget."""
        if not backends:
            raise ValueError("a device pool needs at least one device slot")
        if device_steps < 1:
            raise ValueError(f"device_steps must be at least 1, got {device_steps}")
        self.device_steps = device_steps
        self.slots = [DeviceSlot(index=i, backend=b, lock=StepGate(device_steps))
                      for i, b in sorted(backends.items())]
        self.build_pool = threading.BoundedSemaphore(build_workers)
        self._guard = threading.Lock()

    def acquire(self) -> DeviceSlot:
        """The least-loaded slot, now counted as serving one more episode."""
        with self._guard:
            slot = min(self.slots, key=lambda s: (s.in_flight, s.placed, s.index))
            slot.in_flight += 1
            slot.placed += 1
            return slot

    def release(self, slot: DeviceSlot) -> None:
        """The episode on ``slot`` ended."""
        with self._guard:
            slot.in_flight -= 1

    @contextmanager
    def on_device(self, slot: DeviceSlot, usage: EpisodeUsage) -> Iterator[None]:
        """Hold one of ``slot``'s device-step places (``device_steps`` of this process at a time) and its device's
        machine-wide lock in the shared mode (nobody times on the device meanwhile; the step's own timing takes the
        exclusive mode inside), accounting the wait and the held time."""
        t0 = time.monotonic()
        with slot.lock, _machine_lock(slot):
            t1 = time.monotonic()
            try:
                yield
            finally:
                t2 = time.monotonic()
                with self._guard:
                    slot.wait_s += t1 - t0
                    slot.busy_s += t2 - t1
                    slot.calls += 1
                usage.gpu_wait_s += t1 - t0
                usage.gpu_busy_s += t2 - t1

    def note_phases(self, slot: DeviceSlot, usage: EpisodeUsage, result: CandidateResult) -> None:
        """Account where a device step's time went (the result's evaluator sub-phases), per episode and slot."""
        phase_s = result.diagnostics.phase_s if result.diagnostics is not None else {}
        usage.add_phases(phase_s)
        if result.diagnostics is not None:
            usage.add_runner_start(result.diagnostics)
        with self._guard:
            for name, seconds in phase_s.items():
                slot.phase_s[name] = slot.phase_s.get(name, 0.0) + float(seconds)

    @contextmanager
    def building(self, usage: EpisodeUsage) -> Iterator[None]:
        """Hold a build-pool slot, accounting the wait for it and the build time."""
        t_wait = time.monotonic()
        with self.build_pool:
            t0 = time.monotonic()
            usage.build_wait_s += t0 - t_wait
            try:
                yield
            finally:
                usage.build_s += time.monotonic() - t0

    def close(self) -> None:
        """Close every slot's backend."""
        for slot in self.slots:
            slot.backend.close()


class ScheduledBackend:
    """A slot's backend seen by one episode: same protocol, calls routed through the pool.

    ``close`` does nothing: the pool owns the backend and closes it at the end.
    """

    def __init__(self, pool: DevicePool, slot: DeviceSlot, usage: EpisodeUsage) -> None:
        self._pool, self._slot, self.usage = pool, slot, usage
        inner = slot.backend
        self.name = inner.name
        self.skill = inner.skill
        self.kernel_suffix = inner.kernel_suffix

    @property
    def device_index(self) -> int:
        """Index of the slot this episode runs on."""
        return self._slot.index

    def availability(self) -> tuple[bool, str]:
        """Delegated."""
        return self._slot.backend.availability()

    def device_facts(self) -> dict[str, Any]:
        """Delegated, plus the slot index."""
        return {**self._slot.backend.device_facts(), "slot": self._slot.index}

    def prepare_workspace(self, task: TaskManifest, root: Path) -> Any:
        """Delegated; the task's warm-up starts in the background (the policy's first turns hide it)."""
        ws = self._slot.backend.prepare_workspace(task, root)
        self._warm_async(task)
        return ws

    def _warm_async(self, task: TaskManifest) -> threading.Thread | None:
        """:meth:`warm` on a daemon thread (None when the backend has no warm-up). The warm-up is idempotent per
        task, so a later call finds the work done or waits for the thread already doing it."""
        if not isinstance(self._slot.backend, WarmableBackend):
            return None
        t = threading.Thread(target=self.warm, args=(task,), name="warm-up", daemon=True)
        t.start()
        return t

    def warm(self, task: TaskManifest) -> None:
        """The backend's optional warm-up for ``task`` (reference process, compiled baselines), no lock held.

        A failure is only logged: the call that follows meets the same problem under the lock and reports it in
        its result, as it would without a warm-up.
        """
        backend = self._slot.backend
        if not isinstance(backend, WarmableBackend):
            return
        try:
            backend.warm(task)
        except Exception as exc:  # noqa: BLE001 - reported by the evaluation that follows
            log.warning("warm_up.failed", task=getattr(task, "id", None), error=f"{type(exc).__name__}: {exc}"[:300])

    def _timed(self, phase: str, workspace: Any, task: TaskManifest) -> CandidateResult:
        """Build in the build pool while the warm-up runs beside it (no lock), then only the device step under the
        timing lock.

        A backend without the split protocol (:class:`~cuda_agent.protocols.SplitBackend`) runs its whole call
        under the lock.
        """
        inner = self._slot.backend
        if not isinstance(inner, SplitBackend):
            t_warm = time.monotonic()
            self.warm(task)
            self.usage.warm_wait_s += time.monotonic() - t_warm
            with self._pool.on_device(self._slot, self.usage):
                result = getattr(inner, phase)(workspace, task)
            self._pool.note_phases(self._slot, self.usage, result)
            return result
        warming = self._warm_async(task)  # seconds of process start and torch.compile, beside the build
        with self._pool.building(self.usage):
            prepared = inner.build_for(phase, workspace, task)
        try:
            if prepared.outcome is None:  # did not build: nothing for the device to do
                return inner.evaluate_built(prepared)
            if warming is not None:
                t_warm = time.monotonic()
                warming.join()  # warm before the device is ours
                self.usage.warm_wait_s += time.monotonic() - t_warm
            with self._pool.on_device(self._slot, self.usage):
                result = inner.evaluate_built(prepared)
            self._pool.note_phases(self._slot, self.usage, result)
            return result
        finally:
            prepared.close()

    def compile(self, workspace: Any, task: TaskManifest) -> CandidateResult:
        """Built inside the build pool."""
        with self._pool.building(self.usage):
            return self._slot.backend.compile(workspace, task)

    def verify(self, workspace: Any, task: TaskManifest) -> CandidateResult:
        """Rebuild (if needed) in the build pool, then the checks under the device's timing lock."""
        return self._timed("verify", workspace, task)

    def profile(self, workspace: Any, task: TaskManifest) -> CandidateResult:
        """Rebuild (if needed) in the build pool, then checks and timing under the device's timing lock."""
        return self._timed("profile", workspace, task)

    def grade(self, workspace: Any, task: TaskManifest) -> CandidateResult:
        """The from-scratch rebuild in the build pool, then the grading pass under the device's timing lock."""
        return self._timed("grade", workspace, task)

    def counters(self, workspace: Any, task: TaskManifest, **options: Any) -> Any:
        """Hardware counters (the ``ncu`` tool) on the slot's device, as one device call."""
        inner = getattr(self._slot.backend, "counters", None)
        if inner is None:
            from cuda_agent.harness.ncu_profile import NcuRefused

            raise NcuRefused(f"backend {self.name!r} cannot profile hardware counters")
        with self._pool.on_device(self._slot, self.usage):
            return inner(workspace, task, **options)

    def close(self) -> None:
        """No-op: the pool closes the shared backend."""
