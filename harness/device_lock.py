"""The per-device lock every harness process and generation engine on a machine shares: timing alone, the rest shared.

A timed batch must have the device to itself: any other work on the GPU (another candidate's checks, a reference
making its sets, a policy generating) makes the candidate read slower and can deny it a speed-up milestone. Work
that is not timed only has to stay out of timed batches; two such pieces of work may share the device.

So the lock has two modes, on one ``flock`` file under /tmp that separate processes honour:

* exclusive (``with lock:``), around every timed batch;
* shared (``with lock.shared():``), around untimed device work: a scheduler's device steps (checks, set making,
  loading), and generation.

A thread holding the shared mode that enters the exclusive one (a profile's timing inside its device step) drops
its shared lock first and takes the exclusive one, then returns to shared; so two such threads never wait on each
other. A second file, the turnstile, gives waiting exclusive holders priority: a new shared holder passes through
it, and an exclusive one holds it while it waits for the shared holders to leave, so a stream of untimed work
cannot starve a timed batch. A thread that holds the shared mode must not block on anything a waiting exclusive
holder may hold: it waits :meth:`TimingLock.outside` its hold (a baseline's cache key). Both modes are re-entrant
per thread (over every lock object naming the same file); threads of one process exclude each other like processes
do (each holds the lock through its own open file, and ``flock`` locks belong to open files).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class _Held:
    """One thread's hold of one lock file: its open file, how deep it is in each mode, and what its holds cost
    (:meth:`TimingLock.thread_counters`)."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.exclusive = 0
        self.shared = 0
        self.exclusive_since = 0.0  # monotonic time the outermost exclusive hold was taken
        #: Seconds held in the exclusive mode, seconds waited for it, outermost exclusive holds taken, seconds
        #: waited for the shared mode: this thread's, since it first used the file.
        self.counters = dict.fromkeys(LOCK_COUNTERS, 0.0)


#: What :meth:`TimingLock.thread_counters` counts.
LOCK_COUNTERS = ("exclusive_s", "exclusive_wait_s", "exclusive_takes", "shared_wait_s")


_THREAD = threading.local()


def holds_any() -> bool:
    """Whether this thread holds any timing lock (any device's file, either mode) now."""
    held: dict[str, _Held] = _THREAD.__dict__.get("held", {})
    return any(h.shared > 0 or h.exclusive > 0 for h in held.values())


class TimingLock:
    """A device's lock: exclusive for timed batches (``with lock``), shared for untimed device work
    (``with lock.shared()``); see the module docstring."""

    def __init__(self, device_key: str, lock_dir: Path | None = None) -> None:
        safe = "".join(c if c.isalnum() else "_" for c in device_key)
        folder = Path(lock_dir or tempfile.gettempdir())
        self.path = folder / f"cuda-agent-timing-{safe}.lock"
        self.turnstile = folder / f"cuda-agent-timing-{safe}.turnstile"

    @classmethod
    def at(cls, path: str | Path) -> TimingLock:
        """The lock whose file is ``path`` (another process's :attr:`path`: a reference process warming up under
        the lock its evaluator times under)."""
        lock = cls.__new__(cls)
        lock.path = Path(path)
        lock.turnstile = lock.path.with_suffix(".turnstile")
        return lock

    def _state(self) -> _Held:
        """This thread's hold of this lock file, shared by every TimingLock object naming it (an evaluator's and a
        scheduler's objects nest: one fd per thread and file, or a thread would wait for itself)."""
        held: dict[str, _Held] = _THREAD.__dict__.setdefault("held", {})
        return held.setdefault(str(self.path), _Held())

    def _open(self) -> int:
        return os.open(self.path, os.O_CREAT | os.O_RDWR, 0o666)

    def _through_turnstile(self, fd: int, mode: int) -> None:
        """Take ``mode`` on the lock file while holding the turnstile (released when the lock is ours); the wait
        goes into this thread's counters."""
        t0 = time.monotonic()
        gate = os.open(self.turnstile, os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(fd, mode)
        finally:
            os.close(gate)  # closing the file releases its flock
            key = "exclusive_wait_s" if mode == fcntl.LOCK_EX else "shared_wait_s"
            self._state().counters[key] += time.monotonic() - t0

    def thread_counters(self) -> dict[str, float]:
        """This thread's use of this lock file so far (every lock object naming it): ``exclusive_s`` (seconds in
        timed batches, the device to itself: the part of a run no concurrency overlaps), ``exclusive_wait_s``
        (seconds waiting to get there: other timed batches, or untimed work finishing), ``exclusive_takes`` and
        ``shared_wait_s``; an exclusive hold still open counts up to now. Subtract two readings for a span."""
        mine = self._state()
        out = dict(mine.counters)
        if mine.exclusive:
            out["exclusive_s"] += time.monotonic() - mine.exclusive_since
        return out

    def _release(self, mine: _Held) -> None:
        fcntl.flock(mine.fd, fcntl.LOCK_UN)
        os.close(mine.fd)
        mine.fd = None

    def held_exclusive(self) -> bool:
        """Whether this thread holds the exclusive mode (is inside a timed batch) now."""
        return self._state().exclusive > 0

    def held(self) -> bool:
        """Whether this thread holds the lock in either mode now."""
        mine = self._state()
        return mine.exclusive > 0 or mine.shared > 0

    def path_for_child(self) -> str | None:
        """The lock file a child process this thread waits on may hold shared around its own device work; None
        where this thread holds the lock already: that hold covers the child's work, and the child would wait on a
        turnstile that an exclusive waiter holds behind this thread's hold."""
        return None if self.held() else str(self.path)

    # exclusive --------------------------------------------------------------------------------------
    def __enter__(self) -> TimingLock:
        mine = self._state()
        if mine.exclusive == 0:
            if mine.fd is None:
                mine.fd = self._open()
            else:  # held shared: let go first, so a peer converting at the same time is not waiting on us
                fcntl.flock(mine.fd, fcntl.LOCK_UN)
            try:
                self._through_turnstile(mine.fd, fcntl.LOCK_EX)
            except BaseException:
                if mine.shared:  # interrupted while converting: hold what the caller still expects
                    fcntl.flock(mine.fd, fcntl.LOCK_SH)
                else:
                    os.close(mine.fd)
                    mine.fd = None
                raise
            mine.exclusive_since = time.monotonic()
            mine.counters["exclusive_takes"] += 1
        mine.exclusive += 1
        return self

    def __exit__(self, *exc: object) -> None:
        mine = self._state()
        mine.exclusive -= 1
        if mine.exclusive == 0:
            mine.counters["exclusive_s"] += time.monotonic() - mine.exclusive_since
            if mine.shared:
                fcntl.flock(mine.fd, fcntl.LOCK_SH)  # back to the shared mode the caller entered with
            else:
                self._release(mine)

    # shared -----------------------------------------------------------------------------------------
    def _take_shared(self, mine: _Held) -> None:
        """This thread holds nothing on the file yet: take the shared mode through the turnstile."""
        fd = self._open()
        try:
            self._through_turnstile(fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        mine.fd = fd

    def enter_shared(self) -> None:
        """Hold the device for untimed work (re-entrant; :meth:`exit_shared` once per call)."""
        mine = self._state()
        if mine.fd is None:
            self._take_shared(mine)
        mine.shared += 1

    def exit_shared(self) -> None:
        """Leave one :meth:`enter_shared`; the file is let go when this thread holds it in no mode."""
        mine = self._state()
        mine.shared -= 1
        if mine.shared == 0 and mine.exclusive == 0:
            self._release(mine)

    @contextmanager
    def shared(self) -> Iterator[TimingLock]:
        """Hold the device for untimed work: beside other shared holders, never beside a timed batch."""
        self.enter_shared()
        try:
            yield self
        finally:
            self.exit_shared()

    @contextmanager
    def outside(self) -> Iterator[None]:
        """Let go of this thread's shared hold for the block, then take it again: around a wait for something
        (a baseline's cache key) whose holder may be waiting for the exclusive mode behind our shared hold."""
        mine = self._state()
        if mine.shared == 0 or mine.exclusive > 0:
            yield
            return
        depth, mine.shared = mine.shared, 0
        self._release(mine)
        try:
            yield
        finally:
            self._take_shared(mine)
            mine.shared = depth


class SharedHold:
    """A lock's shared mode as a context manager object, entered once per call (a generation engine's ``hold``)."""

    def __init__(self, lock: TimingLock) -> None:
        self.lock = lock

    def __enter__(self) -> SharedHold:
        self.lock.enter_shared()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.exit_shared()


def shared_at(path: str | None) -> contextlib.AbstractContextManager[object]:
    """The shared mode of the lock whose file is ``path`` (a parent's :meth:`TimingLock.path_for_child`), or
    nothing for None."""
    return TimingLock.at(path).shared() if path else contextlib.nullcontext()


def device_timing_lock(kind: str, device_index: int = 0, lock_dir: Path | None = None) -> TimingLock:
    """The lock of device ``device_index`` of backend kind ``kind`` (``cuda``/``cpu``): the one lock every evaluator
    on the machine times that device under (exclusive), and that untimed device work and a generation engine on
    the same device hold shared."""
    return TimingLock(f"{kind}{device_index}", lock_dir=lock_dir)
