"""One memory budget per device, shared by everything a run does on it.

KernelBench level 1 has 4-16 GiB of inputs plus outputs per input set: a
reference process and a candidate runner that each keep a dozen sets cannot
fit on any GPU, and eight tasks in flight that each read the device's free
memory and take it would all run out together. So the parent (the only one
that sees every task) keeps one :class:`MemoryBudget` per device:

- its capacity is measured once, when the device is first used: a share of
  the memory free then (NVML on CUDA, so the parent never creates a CUDA
  context; available RAM on the CPU backend);
- before a task's session opens, its whole footprint (both processes, the
  input sets they hold, the staged fresh sets, the forward's temporaries) is
  reserved; the session starts only once that fits beside what is reserved
  already, and gives it back when it ends, whatever happened in it;
- processes kept warm between sessions hold their resident bytes (context,
  parameters) as a standing hold; when a reservation does not fit, the owner
  of those processes is asked to close idle ones (``on_pressure``);
- a session that has waited :data:`FAIR_AFTER_S` holds new tasks back (their
  probes and warm-ups wait behind it) until it fits, so a task that needs most
  of the device is not starved by smaller ones;
- a footprint larger than the whole capacity fails at once with
  :class:`TooLarge`, naming the bytes needed and the bytes available.

How many sets a footprint holds is decided by :func:`plan_sets`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import structlog

from cuda_agent.errors import CudaAgentError

log = structlog.get_logger(__name__)

GiB = 2**30
MiB = 2**20
#: Bytes a process costs before it holds any tensor: the CUDA context and torch's own state (CUDA), or the
#: interpreter with torch imported (CPU). Measured: 0.5-0.6 GiB per CUDA process on the H200, 0.3 GiB of RSS here.
PROCESS_OVERHEAD = {"cuda": 768 * MiB, "cpu": 384 * MiB}
#: Sets both sides keep when they can (the timed calls rotate over them without hand-overs or sets made again).
ROTATION_PAIR = 2
#: Share of the memory free at the first measurement that tasks may reserve: the rest absorbs allocator
#: fragmentation, cuBLAS/cuDNN workspaces and torch.compile's temporaries that no footprint names.
USABLE_SHARE = 0.85
#: Seconds a session's reservation may wait for memory before new tasks stop being admitted (their probes and
#: warm-ups wait behind it): without this a task that needs most of the device (KernelBench's level2/19 needs 65
#: GiB of an H100's 67) waited until a run's cap while smaller tasks kept fitting in beside each other.
FAIR_AFTER_S = 30.0


class TooLarge(CudaAgentError):
    """A footprint that cannot fit even alone on the device (one input set, both processes)."""

    def __init__(self, needed: int, available: int, what: str) -> None:
        self.needed = needed
        self.available = available
        self.what = what
        super().__init__(
            f"{what} needs {fmt_bytes(needed)} but only {fmt_bytes(available)} of device memory can be reserved "
            f"(the smallest plan holds one input set per process)")


def fmt_bytes(n: float) -> str:
    """``12.0 GiB``, ``640 MiB``: bytes for a person."""
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


@dataclass(frozen=True)
class Footprint:
    """What one input set of a task occupies, measured on the meta device or by the reference process."""

    input_bytes: int
    """Bytes of the tensors ``get_inputs()`` returns."""
    output_bytes: int
    """Bytes of the tensors the reference ``forward`` returns."""
    param_bytes: int = 0
    """Parameters and buffers of ``Model(*get_init_inputs())`` (each process holds its own copy)."""
    work_bytes: int = 0
    """Peak temporaries of one reference forward beyond its inputs and outputs (0 when not measured)."""

    @property
    def set_bytes(self) -> int:
        """Inputs plus outputs: what the reference keeps per input set (pristine inputs, expected outputs)."""
        return self.input_bytes + self.output_bytes


@dataclass(frozen=True)
class SetPlan:
    """How many input sets each side holds at once, and the bytes the whole session reserves."""

    reference_sets: int
    """Sets the reference process keeps (inputs and expected outputs); others are made again from their seeds."""
    runner_sets: int
    """Pristine sets the candidate runner keeps (at least 1); a call on another set hands it over just before it."""
    fresh_sets: int
    """Fresh sets staged at once for the timed calls (each handed over and released before the next is staged)."""
    reserved_bytes: int
    """The whole reservation: both processes, the sets they hold, staging and the forwards' temporaries."""

    wanted_sets: int = 0
    """The sets the session uses (each side holds all of them when it can)."""

    @property
    def constrained(self) -> bool:
        """A side holds fewer sets than the session uses: sets are dropped and made or handed over again."""
        return self.reference_sets < self.wanted_sets or self.runner_sets < self.wanted_sets


def session_bytes(fp: Footprint, kind: str, reference_sets: int, runner_sets: int, fresh_sets: int) -> int:
    """Bytes one session reserves with these set counts.

    Reference process: context, parameters, its sets, one forward's temporaries and outputs (a baseline call),
    an exported copy of one set's inputs (a hand-over) and the candidate's outputs it opens to compare. Runner:
    context, parameters, its pristine sets, the working copy of one call's inputs, the call's outputs and their
    exported copy, the candidate's temporaries (taken to be the reference's). Staged fresh sets: their inputs and
    expected outputs in the reference and an exported copy of their inputs.
    """
    overhead = PROCESS_OVERHEAD.get(kind, PROCESS_OVERHEAD["cuda"])
    reference = (overhead + fp.param_bytes + reference_sets * fp.set_bytes + fp.work_bytes + 2 * fp.output_bytes
                 + fp.input_bytes)
    runner = (overhead + fp.param_bytes + runner_sets * fp.input_bytes + fp.input_bytes + 2 * fp.output_bytes
              + fp.work_bytes)
    return reference + runner + fresh_sets * (fp.set_bytes + fp.input_bytes)


def plan_sets(fp: Footprint, kind: str, capacity: int, *, wanted_sets: int, wanted_fresh: int) -> SetPlan:
    """The largest plan that fits ``capacity``: every wanted set on both sides when it fits, else fewer.

    The runner gives up its own copies first, down to two (the timed calls then rotate over two sets both sides
    hold: no hand-over and no set made again inside a timed batch), then the reference holds fewer sets, down to
    two (a dropped set is made again from its seed: ``get_inputs`` on the device and one forward), then fewer fresh
    sets are staged at once, and last one set per side (a hand-over before every timed call). Raises
    :class:`TooLarge` when even one set per side does not fit.
    """
    w = max(1, wanted_sets)
    f = max(0, wanted_fresh)
    pair = min(w, ROTATION_PAIR)
    candidates = [(w, w, f)]
    candidates += [(w, r, f) for r in range(w - 1, pair - 1, -1)]
    candidates += [(ref, pair, fresh) for fresh in (f, min(f, 1)) for ref in range(w - 1, pair - 1, -1)]
    candidates += [(ref, 1, min(f, 1)) for ref in range(w, 0, -1)]
    candidates += [(1, 1, 0)]
    for ref, run, fresh in candidates:
        need = session_bytes(fp, kind, ref, run, fresh)
        if need <= capacity:
            return SetPlan(reference_sets=ref, runner_sets=run, fresh_sets=fresh, reserved_bytes=need,
                           wanted_sets=wanted_sets)
    raise TooLarge(session_bytes(fp, kind, 1, 1, 0), capacity, "one session of this task")


def measure_free_bytes(kind: str, device_index: int = 0) -> int:
    """Memory free on the device now: NVML's free bytes (CUDA; no CUDA context is created) or available RAM."""
    if kind == "cuda":
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            return int(pynvml.nvmlDeviceGetMemoryInfo(handle).free)
        finally:
            pynvml.nvmlShutdown()
    import psutil

    return int(psutil.virtual_memory().available)


def clamped_capacity(kind: str, configured: int, device_index: int = 0) -> int:
    """``configured`` bytes (``limits.device_memory_gib``), but never more than :data:`USABLE_SHARE` of what the
    device has free now: a figure set for a 141 GB H200 (a preset's ``device_gib=120``) must not let tasks reserve
    120 GiB of an 80 GB H100. Where free memory cannot be read, ``configured`` stands."""
    try:
        usable = int(USABLE_SHARE * measure_free_bytes(kind, device_index))
    except Exception:  # noqa: BLE001 - no NVML (or no psutil): the configured figure is all there is
        return configured
    if configured > usable:
        log.warning("memory.capacity_clamped", configured=fmt_bytes(configured), usable=fmt_bytes(usable),
                    why="limits.device_memory_gib is more than this device has free")
        return usable
    return configured


@dataclass
class _Hold:
    nbytes: int
    what: str
    since: float = field(default_factory=time.monotonic)


class MemoryBudget:
    """Reservations against one device's memory, shared by every evaluator of the process.

    :param kind: 'cuda' or 'cpu' (what :data:`PROCESS_OVERHEAD` to count per process).
    :param capacity: bytes tasks may reserve in all; ``None`` = :data:`USABLE_SHARE` of the memory free now.
    """

    def __init__(self, kind: str, capacity: int | None = None, device_index: int = 0) -> None:
        self.kind = kind
        self.device_index = device_index
        self.capacity = int(capacity if capacity is not None else USABLE_SHARE * measure_free_bytes(kind, device_index))
        self._cond = threading.Condition()
        self._holds: dict[int, _Hold] = {}
        self._next = 0
        #: Called with the bytes missing when a reservation does not fit; returns the bytes it let go of.
        self.on_pressure: list[Callable[[int], int]] = []
        #: Highest total ever reserved at once (for tests and reports).
        self.peak_reserved = 0
        #: Reservations waiting for memory now.
        self.waiting = 0
        #: Exclusive reservations waiting now: while one waits, no ordinary reservation is granted (it would
        #: otherwise never see the device empty while smaller ones keep fitting in beside each other).
        self._exclusive_waiting = 0
        #: Exclusive reservations granted so far (:meth:`hold_exclusive`; for tests and reports).
        self.exclusive_holds = 0
        #: Once a waiting reservation that is not an admission (a session of a task already started) has waited this
        #: long, admissions (``hold(admission=True)``: a new task's probe or warm-up) wait behind it, so that the
        #: work in flight drains and it fits; sessions already under way still take what fits.
        self.fair_after_s = FAIR_AFTER_S
        self._waiting_since: dict[int, float] = {}  # waiting reservations that are not admissions -> since when
        #: Admissions that waited because an older reservation had waited :attr:`fair_after_s` (tests, reports).
        self.admissions_held = 0

    @property
    def reserved(self) -> int:
        """Bytes reserved now (sessions and standing holds)."""
        with self._cond:
            return sum(h.nbytes for h in self._holds.values())

    def hold(self, nbytes: int, what: str, *, timeout_s: float | None = None, force: bool = False,
             admission: bool = False) -> int:
        """Reserve ``nbytes`` until :meth:`release` of the returned id; waits until it fits (raises
        :class:`TooLarge` at once when it never can, ``TimeoutError`` after ``timeout_s``). ``force``: take it at
        once, after asking the owners of idle processes to let go, even beyond the capacity (a process that is
        started anyway: later reservations then wait for it). ``admission``: the reservation starts a new task's
        work (its probe or warm-up); it also waits while another reservation has waited :attr:`fair_after_s`."""
        nbytes = max(0, int(nbytes))
        if force:
            with self._cond:
                free = self.capacity - sum(h.nbytes for h in self._holds.values())
            if nbytes > free:
                for cb in list(self.on_pressure):
                    cb(nbytes - free)
            with self._cond:
                hid = self._next
                self._next += 1
                self._holds[hid] = _Hold(nbytes, what)
                self.peak_reserved = max(self.peak_reserved, sum(h.nbytes for h in self._holds.values()))
                return hid
        if nbytes > self.capacity:
            raise TooLarge(nbytes, self.capacity, what)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            return self._hold_when_free(nbytes, what, deadline, timeout_s, admission=admission)

    def hold_exclusive(self, what: str, *, keep: int = 0, timeout_s: float | None = None) -> int:
        """Reserve everything but ``keep`` bytes (the caller's own standing holds, e.g. its reference process):
        the device for one piece of work alone, for a retry after an out-of-memory error that other work beside
        it may have caused. While it waits, ordinary reservations wait behind it (idle processes are asked to
        close as for any reservation); forced holds (processes started anyway) are still taken."""
        nbytes = max(0, self.capacity - max(0, int(keep)))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            self._exclusive_waiting += 1
            try:
                hid = self._hold_when_free(nbytes, what, deadline, timeout_s, exclusive=True)
                self.exclusive_holds += 1
                return hid
            finally:
                self._exclusive_waiting -= 1
                self._cond.notify_all()

    def _starving(self, now: float) -> bool:
        """Whether a reservation other than an admission has waited :attr:`fair_after_s` or longer."""
        return any(now - since >= self.fair_after_s for since in self._waiting_since.values())

    def _hold_when_free(self, nbytes: int, what: str, deadline: float | None, timeout_s: float | None,
                        exclusive: bool = False, admission: bool = False) -> int:
        """:meth:`hold`'s wait (the condition's lock is held); an ordinary hold also waits while an exclusive one
        does, and an admission while another reservation starves (:meth:`_starving`)."""
        asked = False
        waiting = False
        held_back = False
        token = None
        try:
            while True:
                free = self.capacity - sum(h.nbytes for h in self._holds.values())
                fair = not admission or not self._starving(time.monotonic())
                if not fair and not held_back:
                    held_back = True
                    self.admissions_held += 1
                    log.info("memory.admission_held", what=what, reason="an older reservation has waited "
                             f"{self.fair_after_s:.0f} s or more; new tasks wait until it fits")
                if nbytes <= free and fair and (exclusive or not self._exclusive_waiting):
                    hid = self._next
                    self._next += 1
                    self._holds[hid] = _Hold(nbytes, what)
                    self.peak_reserved = max(self.peak_reserved, self.capacity - free + nbytes)
                    return hid
                # Let owners of idle processes close some, once per wait (unlocked); never for an admission held
                # back, which could not take what they free (the starving reservation asks for itself).
                if not asked and nbytes > free and fair:
                    asked = True
                    self._cond.release()
                    try:
                        freed = sum(cb(nbytes - free) for cb in list(self.on_pressure))
                    finally:
                        self._cond.acquire()
                    if freed:
                        continue
                    log.info("memory.waiting", what=what, needed=fmt_bytes(nbytes), free=fmt_bytes(free))
                wait = 5.0 if deadline is None else min(5.0, deadline - time.monotonic())
                if wait <= 0:
                    raise TimeoutError(f"{what}: {fmt_bytes(nbytes)} did not become free within {timeout_s:.0f} s")
                if not waiting:
                    waiting = True
                    self.waiting += 1
                    if not admission and not exclusive:
                        token = self._next
                        self._next += 1
                        self._waiting_since[token] = time.monotonic()
                self._cond.wait(timeout=wait)
                asked = False  # something was released, or a quiet period passed: ask the owners again
        finally:
            if waiting:
                self.waiting -= 1
            if token is not None:
                self._waiting_since.pop(token, None)

    def release(self, hold_id: int) -> None:
        """Give back a hold (unknown ids are ignored: releasing twice is harmless)."""
        with self._cond:
            if self._holds.pop(hold_id, None) is not None:
                self._cond.notify_all()

    @contextmanager
    def reserve(self, nbytes: int, what: str, *, timeout_s: float | None = None,
                admission: bool = False) -> Iterator[int]:
        """:meth:`hold` for the duration of a ``with`` block, released however it ends."""
        hid = self.hold(nbytes, what, timeout_s=timeout_s, admission=admission)
        try:
            yield hid
        finally:
            self.release(hid)

    @contextmanager
    def reserve_exclusive(self, what: str, *, keep: int = 0, timeout_s: float | None = None) -> Iterator[int]:
        """:meth:`hold_exclusive` for the duration of a ``with`` block, released however it ends."""
        hid = self.hold_exclusive(what, keep=keep, timeout_s=timeout_s)
        try:
            yield hid
        finally:
            self.release(hid)


_BUDGETS: dict[tuple[str, int, int | None], MemoryBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def budget_for(kind: str, device_index: int = 0, capacity: int | None = None) -> MemoryBudget:
    """The process-wide budget of a device: every evaluator of the run on that device (with the same configured
    capacity, None = measured at first use) shares it."""
    with _BUDGETS_LOCK:
        key = (kind, device_index, capacity)
        if key not in _BUDGETS:
            _BUDGETS[key] = MemoryBudget(kind, capacity, device_index)
        return _BUDGETS[key]
