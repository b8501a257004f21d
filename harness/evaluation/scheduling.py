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
from cuda_agent.schemas.result import CandidateResult
from cuda_agent.schemas.task import TaskManifest

log = structlog.get_logger(__name__)


@dataclass
class EpisodeUsage:
    """What one episode used of the shared resources."""

    build_s: float = 0.0
    gpu_busy_s: float = 0.0
    gpu_wait_s: float = 0.0


@dataclass
class DeviceSlot:
    """One device: its backend, the lock of this process's device steps on it, and counters."""

    index: int
    backend: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    placed: int = 0
    busy_s: float = 0.0
    wait_s: float = 0.0
    calls: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Counters for the session record."""
        return {"index": self.index, "busy_s": self.busy_s, "wait_s": self.wait_s, "calls": self.calls,
                "episodes": self.placed}


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

    def __init__(self, backends: dict[int, Any], build_workers: int) -> None:
        if not backends:
            raise ValueError("a device pool needs at least one device slot")
        self.slots = [DeviceSlot(index=i, backend=b) for i, b in sorted(backends.items())]
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
        """Hold ``slot`` (one device step of this process at a time) and its device's machine-wide lock in the
        shared mode (no other process times on the device meanwhile; the step's own timing takes the exclusive
        mode inside), accounting the wait and the held time."""
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

    @contextmanager
    def building(self, usage: EpisodeUsage) -> Iterator[None]:
        """Hold a build-pool slot, accounting the build time."""
        with self.build_pool:
            t0 = time.monotonic()
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
            self.warm(task)
            with self._pool.on_device(self._slot, self.usage):
                return getattr(inner, phase)(workspace, task)
        warming = self._warm_async(task)  # seconds of process start and torch.compile, beside the build
        with self._pool.building(self.usage):
            prepared = inner.build_for(phase, workspace, task)
        try:
            if prepared.outcome is None:  # did not build: nothing for the device to do
                return inner.evaluate_built(prepared)
            if warming is not None:
                warming.join()  # warm before the device is ours
            with self._pool.on_device(self._slot, self.usage):
                return inner.evaluate_built(prepared)
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
