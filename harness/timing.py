"""Timing primitives shared by the candidate runner, baselines and grading.

Protocol of one timed call (method ``events_l2flush`` on CUDA, ``host_sync``
on CPU): fresh inputs copied in, L2 flushed by writing a buffer larger than
it, persisting-L2 lines reset, device-wide synchronize, then the call, then a
device-wide synchronize (side streams cannot escape, T9). On CUDA both event
time and host time are taken; when host time exceeds event time by far, work
ran outside the events' stream and the host time counts.

Decisions live on the trusted side: :func:`summarize` turns samples into a
:class:`~cuda_agent.schemas.Timing`, :func:`precise_enough` decides when to
stop, :class:`TimingLock` keeps one timed batch per GPU at a time (a file
lock, so separate processes honour it), :func:`speed_of_light_ms` is the
physical floor (T22).
"""

from __future__ import annotations

import ctypes
import fcntl
import math
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cuda_agent.schemas.result import Timing

#: Generous device peaks (spec sheet, dense): (FLOP/s, bytes/s). A result under the floor is impossible.
DEVICE_PEAKS: dict[str, tuple[float, float]] = {
    "H200": (1.0e15, 4.9e12),
    "H100": (1.0e15, 3.4e12),
    "A100": (3.2e14, 2.1e12),
    "L40S": (7.4e14, 8.7e11),
    "B200": (2.3e15, 8.1e12),
}


#: Environment variable through which the harness hands ``timing_preroll_us`` to its child processes.
PREROLL_ENV = "CUDA_AGENT_TIMING_PREROLL_US"
#: Environment variables: ``HarnessSettings.timing_preroll_retakes`` and ``timing_preroll_max_us`` for child processes.
PREROLL_RETAKES_ENV = "CUDA_AGENT_TIMING_PREROLL_RETAKES"
PREROLL_MAX_ENV = "CUDA_AGENT_TIMING_PREROLL_MAX_US"
#: The longest spin a retake may use (us) when nothing else says.
DEFAULT_PREROLL_MAX_US = 5000.0
#: Environment variable: the L2 flush mode ('write' or 'read') of a process's timers when the constructor names none
#: (for experiments such as benchmarks/timing_spread_probe.py; the harness itself always flushes by writing).
FLUSH_ENV = "CUDA_AGENT_TIMING_L2_FLUSH"
#: Environment variable: "1" when the reference process reports baselines net of its protocol cost.
NET_ENV = "CUDA_AGENT_TIMING_NET_OVERHEAD"
#: Environment variable: the flush buffer's size in multiples of the L2 (``HarnessSettings.timing_l2_flush_multiple``)
#: of a process's timers when the constructor names no size; unset = :data:`DEFAULT_FLUSH_MULTIPLE`.
FLUSH_MULTIPLE_ENV = "CUDA_AGENT_TIMING_L2_FLUSH_MULTIPLE"
#: The flush buffer's size in L2 multiples when nothing else says.
DEFAULT_FLUSH_MULTIPLE = 2.0
#: What :func:`l2_bytes` assumes where the device does not say (CUDA) and on CPU (a last-level cache's order).
FALLBACK_L2_BYTES = {"cuda": 50 * 2**20, "cpu": 16 * 2**20}
#: Environment variable: "1" when a process's timers warm the inputs' address translations after each flush
#: (``HarnessSettings.timing_warm_input_pages``) and the constructor does not say.
WARM_PAGES_ENV = "CUDA_AGENT_TIMING_WARM_INPUT_PAGES"
#: Stride of that warm-up: one byte read per page of the caching allocator's large segments.
WARM_PAGE_BYTES = 2 << 20
#: Null calls (one element written) timed at a CUDA timer's start to measure the protocol's own cost per call.
OVERHEAD_CALLS = 64
#: The smallest time a net-of-overhead call is reported as (ms): a call at or under the protocol's own cost.
NET_FLOOR_MS = 1e-4
#: A measured protocol cost above this (ms) is not the protocol's (the GPU was busy with another process's work
#: while it was measured): nothing is subtracted then. The H200's is 3.1-3.3 us.
MAX_OVERHEAD_MS = 0.02


#: Attempts of :func:`calibrated_overhead` at a protocol cost under :data:`MAX_OVERHEAD_MS`.
CALIBRATE_ATTEMPTS = 3


def calibrated_overhead(timer: Any, attempts: int = CALIBRATE_ATTEMPTS) -> float:
    """``timer.measure_overhead()`` again while it reads over :data:`MAX_OVERHEAD_MS` (another process's GPU work
    overlapped it: untimed work such as a reference process making its input sets does not take the timing lock;
    seen once on the H200 at 34 us), at most ``attempts`` times; returns the last reading (one still over the limit
    is then not subtracted, see :func:`net_of_overhead`)."""
    ms = timer.measure_overhead()
    for _ in range(attempts - 1):
        if ms <= MAX_OVERHEAD_MS:
            break
        ms = timer.measure_overhead()
    return ms


def method_id(kind: str, net_overhead: bool) -> str:
    """Method id recorded in :class:`Timing`: 'host_sync' on CPU; on CUDA 'events_l2flush', or
    'events_l2flush_net' when the protocol's per-process cost (:attr:`DeviceTimer.overhead_ms`) is subtracted."""
    if kind != "cuda":
        return "host_sync"
    return "events_l2flush_net" if net_overhead else "events_l2flush"


def net_of_overhead(ms: float, overhead_ms: float) -> float:
    """``ms`` less the protocol's own cost of a call, never under :data:`NET_FLOOR_MS`; ``ms`` unchanged when the
    cost is over :data:`MAX_OVERHEAD_MS` (not measurable) or not positive."""
    if not 0 < overhead_ms <= MAX_OVERHEAD_MS:
        return ms
    return max(ms - overhead_ms, NET_FLOOR_MS)


#: How :meth:`DeviceTimer.flush` evicts the L2: 'write' fills a buffer twice the L2 (the lines left in the L2 are
#: dirty, and the timed call pays for writing them back as it evicts them); 'read' reads that buffer (clean lines:
#: evicting them costs nothing).
FLUSH_MODES = ("write", "read")


class TimingLock:
    """Exclusive per-device lock held around every timed batch (``flock`` under /tmp).

    Any process on the machine that times on the same device takes the same
    file lock, so two timed batches never overlap on one GPU. Re-entrant per
    thread; threads of one process sharing the object exclude each other too
    (each holds the lock through its own open file, and ``flock`` locks belong
    to open files, not processes).
    """

    def __init__(self, device_key: str, lock_dir: Path | None = None) -> None:
        safe = "".join(c if c.isalnum() else "_" for c in device_key)
        self.path = Path(lock_dir or tempfile.gettempdir()) / f"cuda-agent-timing-{safe}.lock"
        self._mine = threading.local()  # this thread's fd and depth

    def __enter__(self) -> TimingLock:
        mine = self._mine
        if getattr(mine, "depth", 0) == 0:
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o666)
            fcntl.flock(fd, fcntl.LOCK_EX)
            mine.fd = fd
            mine.depth = 0
        mine.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        mine = self._mine
        mine.depth -= 1
        if mine.depth == 0:
            fcntl.flock(mine.fd, fcntl.LOCK_UN)
            os.close(mine.fd)
            mine.fd = None


def median_rel_ci(samples: Sequence[float]) -> float:
    """Relative half-width of a ~95% order-statistic confidence interval of the median."""
    n = len(samples)
    if n < 3:
        return math.inf
    xs = sorted(samples)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    med = statistics.median(xs)
    if med <= 0:
        return math.inf
    return (xs[hi] - xs[lo]) / 2 / med


def precise_enough(samples: Sequence[float], *, min_calls: int, max_calls: int, target_rel_ci: float) -> bool:
    """True when timing may stop: the cap is reached, or enough calls and a tight median."""
    if len(samples) >= max_calls:
        return True
    return len(samples) >= min_calls and median_rel_ci(samples) <= target_rel_ci


def timing_done(samples: Sequence[float], settings: Any, elapsed_s: float) -> bool:
    """The stopping rule of an adaptive timing loop under ``settings`` (:class:`HarnessSettings`), ``elapsed_s``
    after its budget started: the cap of calls; or a precise median once ``min_timing_s`` has passed; or, with
    at least ``min_timed_calls``, the ``max_timing_s`` budget spent."""
    if len(samples) >= settings.max_timed_calls:
        return True
    if len(samples) >= settings.min_timed_calls and elapsed_s > settings.max_timing_s:
        return True
    return elapsed_s >= settings.min_timing_s and precise_enough(
        samples, min_calls=settings.min_timed_calls, max_calls=settings.max_timed_calls,
        target_rel_ci=settings.target_rel_ci,
    )


def summarize(samples: Sequence[float], method: str, wall_ms: float | None = None, **extra: Any) -> Timing:
    """A :class:`Timing` from per-call milliseconds."""
    xs = sorted(samples)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return Timing(
        median_ms=statistics.median(xs),
        mean_ms=statistics.fmean(xs),
        min_ms=xs[0],
        max_ms=xs[-1],
        iqr_ms=q[2] - q[0],
        rel_ci=median_rel_ci(xs) if len(xs) >= 3 else None,
        samples=len(xs),
        method=method,
        wall_ms=wall_ms,
        **extra,
    )


def speed_of_light_ms(flops: float | None, bytes_moved: float | None, device_name: str) -> float | None:
    """Physical lower bound of one forward on ``device_name``; None when unknown (CPU, no FLOP count)."""
    peaks = next((v for k, v in DEVICE_PEAKS.items() if k in device_name), None)
    if peaks is None or (not flops and not bytes_moved):
        return None
    t = max((flops or 0.0) / peaks[0], (bytes_moved or 0.0) / peaks[1])
    return t * 1e3 if t > 0 else None


# ---------------------------------------------------------------------------- in-process timer
def l2_bytes(device: str) -> int:
    """The L2 cache's size of ``device`` ('cuda:N'; on CPU :data:`FALLBACK_L2_BYTES`)."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return FALLBACK_L2_BYTES["cpu"]
    props = torch.cuda.get_device_properties(dev)
    return int(getattr(props, "L2_cache_size", 0) or FALLBACK_L2_BYTES["cuda"])


def flush_multiple_from_env() -> float:
    """The flush size (L2 multiples) the harness set for this process, else :data:`DEFAULT_FLUSH_MULTIPLE`."""
    return _env_number(FLUSH_MULTIPLE_ENV, DEFAULT_FLUSH_MULTIPLE, 1, "the flush must be at least the L2's size (>= 1)")


def warm_input_pages(tensors: Sequence[Any]) -> None:
    """Read one byte of every :data:`WARM_PAGE_BYTES` page (and the last byte) of each tensor's storage.

    An L2 flush walks a buffer of twice the L2 and so also evicts the inputs' address translations from the GPU's
    TLBs; this makes them warm again while the data's lines stay out of the L2 but for one line per 2 MiB (0.006% of
    the bytes). Measured on the H200 (``harness/_timing_variants.py``, 2026-12-01): on inputs written just before
    the flush (a clone per call) row_sum's eager time took 17.95 or 18.9 us by placement with or without it (it
    seemed to cure that in one run, not in the next); on inputs not rewritten before the flush it gave
    17.98-18.32 us in all 18 placements, 17.84-18.85 us without it. Storages are deduplicated; any dtype, layout
    and contiguity (the bytes of the storage are read).
    """
    import torch

    seen: set[int] = set()
    for x in tensors:
        if not isinstance(x, torch.Tensor) or x.device.type != "cuda":
            continue
        storage = x.untyped_storage()
        nbytes = storage.nbytes()
        if nbytes == 0 or storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        raw = torch.empty(0, dtype=torch.uint8, device=x.device).set_(storage)
        raw[::WARM_PAGE_BYTES].sum()  # one kernel: the first byte of the storage, then every page's stride on
        start = storage.data_ptr()
        last_touched = start + (nbytes - 1) // WARM_PAGE_BYTES * WARM_PAGE_BYTES
        if last_touched // WARM_PAGE_BYTES != (start + nbytes - 1) // WARM_PAGE_BYTES:  # an unaligned tail page
            raw[nbytes - 1:].sum()


def protocol_env(preroll_us: float, flush_multiple: float, warm_pages: bool, preroll_retakes: int = 0,
                 preroll_max_us: float = DEFAULT_PREROLL_MAX_US) -> dict[str, str]:
    """The environment through which a candidate runner and a reference process get the same timing protocol
    (read back by :class:`DeviceTimer`'s defaults)."""
    return {PREROLL_ENV: str(preroll_us), FLUSH_MULTIPLE_ENV: str(flush_multiple), WARM_PAGES_ENV: "1" if warm_pages else "0",
            PREROLL_RETAKES_ENV: str(int(preroll_retakes)), PREROLL_MAX_ENV: str(preroll_max_us)}


def _env_number(name: str, default: float, low: float, why: str = "") -> float:
    """A number the harness set for this process in ``$name`` (``default`` when unset), at least ``low`` (``why``:
    what the error then says instead of "must be at least <low>")."""
    raw = os.environ.get(name, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if not value >= low:
        raise ValueError(f"{name}={raw!r}: {why or f'must be at least {low}'}")
    return value


def next_spin_us(spin_us: float, enqueue_ms: float, max_us: float) -> float:
    """The spin of a retake after a take whose host enqueue (``enqueue_ms``) outlasted its ``spin_us``: twice the
    spin, or 1.5 times the enqueue if that is longer (a host path that long again is then covered), at most
    ``max_us``."""
    return min(max_us, max(2.0 * spin_us, 1.5 * enqueue_ms * 1e3))


def empty_host_stats() -> dict[str, float]:
    """:attr:`DeviceTimer.host_stats` with nothing counted yet."""
    return {"calls": 0, "over_spin": 0, "retakes": 0, "max_enqueue_ms": 0.0}


def add_host_stats(total: dict[str, float], part: dict[str, float]) -> None:
    """Add the host statistics ``part`` into ``total`` (counts summed, the longest enqueue kept)."""
    for k in ("calls", "over_spin", "retakes"):
        total[k] = total.get(k, 0) + part.get(k, 0)
    total["max_enqueue_ms"] = max(total["max_enqueue_ms"], part["max_enqueue_ms"])


def timer_state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two :meth:`DeviceTimer.state` snapshots of one timer, in words (empty: nothing)."""
    out = []
    added = sorted(set(after["attributes"]) - set(before["attributes"]))
    removed = sorted(set(before["attributes"]) - set(after["attributes"]))
    if added or removed:
        out.append("attributes " + ", ".join([f"`{a}` added" for a in added] + [f"`{r}` removed" for r in removed]))
    out += [f"`{k}` {before[k]!r} -> {after[k]!r}" for k in before if k != "attributes" and after.get(k) != before[k]]
    return out


def _cudart() -> Any | None:
    """ctypes handle of the CUDA runtime torch loaded, or None."""
    names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    try:
        import nvidia.cuda_runtime as rt  # type: ignore[import-not-found]

        libdir = Path(list(rt.__path__)[0]) / "lib"
        names = [str(p) for p in sorted(libdir.glob("libcudart.so*"))] + names
    except Exception:
        pass
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class DeviceTimer:
    """Times single calls with the harness protocol, inside one process (runner or baseline).

    :param device: 'cpu' or 'cuda:N'.
    :param flush_bytes: size of the cache-flush buffer; default ``$CUDA_AGENT_TIMING_L2_FLUSH_MULTIPLE`` (else 2)
        times the L2 (:func:`l2_bytes`; CPU: 16 MiB).
    :param preroll_us: device spin before each timed call (default: ``$CUDA_AGENT_TIMING_PREROLL_US``, else 0).
    :param flush_mode: one of :data:`FLUSH_MODES` (default: ``$CUDA_AGENT_TIMING_L2_FLUSH``, else 'write').
    :param warm_pages: after each flush, :func:`warm_input_pages` on the tensors :meth:`time_call` is given
        (default: ``$CUDA_AGENT_TIMING_WARM_INPUT_PAGES`` == "1"; CUDA only).
    :param preroll_retakes: CUDA, with a spin: a call whose host enqueue outlasted its spin is taken again, at most
        this many times, with a longer spin (:func:`next_spin_us`); default ``$CUDA_AGENT_TIMING_PREROLL_RETAKES``,
        else 0.
    :param preroll_max_us: the longest spin a retake uses (default ``$CUDA_AGENT_TIMING_PREROLL_MAX_US``, else
        :data:`DEFAULT_PREROLL_MAX_US`).
    """

    def __init__(self, device: str, flush_bytes: int | None = None, preroll_us: float | None = None,
                 flush_mode: str | None = None, warm_pages: bool | None = None, preroll_retakes: int | None = None,
                 preroll_max_us: float | None = None) -> None:
        import torch

        self.device = torch.device(device)
        if preroll_us is None:  # set by the harness for its child processes (HarnessSettings.timing_preroll_us)
            preroll_us = float(os.environ.get(PREROLL_ENV, "0") or 0)
        self.preroll_us = preroll_us
        flush_mode = flush_mode or os.environ.get(FLUSH_ENV) or "write"
        if flush_mode not in FLUSH_MODES:
            raise ValueError(f"L2 flush mode {flush_mode!r} is not one of {list(FLUSH_MODES)}")
        self.flush_mode = flush_mode
        self.is_cuda = self.device.type == "cuda"
        if warm_pages is None:  # set by the harness for its child processes (timing_warm_input_pages)
            warm_pages = os.environ.get(WARM_PAGES_ENV) == "1"
        self.warm_pages = bool(warm_pages) and self.is_cuda
        self.flags: list[str] = []
        if flush_bytes is None:  # set by the harness for its child processes (timing_l2_flush_multiple)
            flush_bytes = int(flush_multiple_from_env() * l2_bytes(str(self.device)))
        if self.is_cuda:
            self.flush_buf = torch.empty(max(flush_bytes, 2**20) // 4, dtype=torch.int32, device=self.device)
            self._rt = _cudart()
            if self._rt is None:
                self.flags.append("persisting_l2_reset_unavailable")
        else:
            self.flush_buf = torch.empty(max(flush_bytes, 2**20) // 4, dtype=torch.int32)
            self._rt = None
        if preroll_retakes is None:  # set by the harness for its child processes (timing_preroll_retakes)
            preroll_retakes = int(_env_number(PREROLL_RETAKES_ENV, 0, 0))
        if preroll_max_us is None:  # likewise (timing_preroll_max_us)
            preroll_max_us = _env_number(PREROLL_MAX_ENV, DEFAULT_PREROLL_MAX_US, 0)
        self.preroll_retakes = int(preroll_retakes)  # used with a spin only (without one, launch overhead is timed)
        self.preroll_max_us = max(float(preroll_max_us), preroll_us)
        #: CUDA with a spin: the events-timed ms of the spin calibration's probes (:meth:`spin_calibration`).
        self.spin_probes_ms: list[float] = []
        self._cycles_per_us, self._preroll_cycles = 0.0, 0
        self.recalibrate_spin()
        self._sync = torch.cuda.synchronize if self.is_cuda else (lambda *a, **k: None)
        self._perf = time.perf_counter
        #: Median ms of a null call (one element written) under this protocol, in this process: None until
        #: :meth:`measure_overhead` ran (0 on CPU). On the H200 it is 3.1-3.3 us and differs between processes by
        #: up to 0.2 us, constant within one: that shift alone moved a 15 us kernel's median 1.4% from process to
        #: process. Meant to be measured under the device's timing lock (another process's kernels made a
        #: measurement taken without it read up to 0.3 ms) and, in a candidate runner, before the candidate loads.
        self.overhead_ms: float | None = None if self.is_cuda else 0.0
        #: CUDA: host milliseconds from the spin's launch to the call's end event enqueued, last timed call.
        self.last_enqueue_ms: float | None = None
        #: CUDA: timed calls, those whose enqueue outlasted the pre-roll spin (the device then idled inside the
        #: events, waiting for the host: a busy host shows in the time) and the longest enqueue, since the last
        #: :meth:`take_host_stats`. The compile baselines of conv2d_relu and gemm read up to 60% apart between
        #: evaluator copies on the H200 with interquartile ranges of 40-108 us while their eager baselines, timed
        #: in the same rounds, stayed within 1%: a compiled call's host path (guards, wrapper, several launches)
        #: outlasting the 200 us spin on a host busy with builds would do that; these counts tell.
        self.host_stats: dict[str, float] = empty_host_stats()

    def _calibrate_spin(self) -> float:
        """GPU clock cycles of ``torch.cuda._sleep`` per microsecond (calibrated once, at the highest clock seen)."""
        import torch

        probe = 1_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(probe)  # the first launch pays the kernel's load (and the clock ramps up)
        ms = float("inf")
        # The fastest of several probes: cycles per microsecond at the highest clock seen, so the spin lasts at
        # least ``us`` whatever clock the GPU runs at later (one probe taken while the clock was still ramping
        # up gave a spin shorter than asked: short kernels' medians then jumped between processes).
        for _ in range(5):
            start.record()
            torch.cuda._sleep(probe)
            end.record()
            end.synchronize()
            self.spin_probes_ms.append(start.elapsed_time(end))
            ms = min(ms, max(self.spin_probes_ms[-1], 1e-3))
        return probe / (ms * 1e3)

    def recalibrate_spin(self) -> None:
        """Size the pre-roll spin (CUDA with a spin; at construction, and again for a caller that now holds the device
        alone, where the first sizing ran beside other processes' GPU work: a candidate runner starts outside the
        lock)."""
        if self.is_cuda and self.preroll_us > 0:
            self.spin_probes_ms = []
            self._cycles_per_us = self._calibrate_spin()
            self._preroll_cycles = self._cycles_for(self.preroll_us)

    def spin_calibration(self) -> dict[str, Any]:
        """How this timer's pre-roll spin was sized, for the record: the spin asked for (us), the cycles per us it
        found and its probes' times (ms, 10^6 cycles each). A process that calibrated while another context kept
        the GPU busy would show slower probes and fewer cycles per us, so a shorter spin than asked."""
        return {"preroll_us": self.preroll_us, "cycles_per_us": self._cycles_per_us,
                "probes_ms": [round(ms, 5) for ms in self.spin_probes_ms]}

    def _cycles_for(self, us: float) -> int:
        """Spin cycles that last about ``us`` microseconds (0: no spin)."""
        return max(1, int(self._cycles_per_us * us)) if self._cycles_per_us and us > 0 else 0

    def measure_overhead(self) -> float:
        """Measure :attr:`overhead_ms` now (the median of :data:`OVERHEAD_CALLS` null calls: the statistic the
        timed calls are reported by) and return it."""
        if not self.is_cuda:
            self.overhead_ms = 0.0
            return 0.0
        import torch

        null = torch.empty(1, device=self.device)
        samples = []
        for i in range(OVERHEAD_CALLS + 8):  # 8 warm-up calls: kernel loaded, clocks up
            _, ms, _ = self.time_call(lambda: null.fill_(1.0))
            if i >= 8:
                samples.append(ms)
        self.overhead_ms = statistics.median(samples)
        return self.overhead_ms

    def flush(self) -> None:
        """Evict caches: reset persisting L2 lines, then overwrite a buffer larger than the L2 (T20)."""
        if self._rt is not None:
            self._rt.cudaCtxResetPersistingL2Cache()
        if self.flush_mode == "read":
            self.flush_buf.max()  # a read of the whole buffer: the L2 is left holding clean lines
        else:
            self.flush_buf.fill_(1)

    def state(self) -> dict[str, Any]:
        """What defines this timer's protocol, for the runner's guard (T8): the attributes it has (a method
        shadowed on the instance shows as a new one) and the values that must not move once a candidate is loaded
        (flush buffer, spin, flush mode, page warm-up). Counters and the measured overhead are left out."""
        buf = self.flush_buf
        return {"attributes": sorted(vars(self)), "flush_buf": [id(buf), buf.data_ptr(), buf.numel()],
                "preroll_cycles": self._preroll_cycles, "preroll_us": self.preroll_us, "flush_mode": self.flush_mode,
                "warm_pages": self.warm_pages, "is_cuda": self.is_cuda, "cycles_per_us": self._cycles_per_us,
                "preroll_retakes": self.preroll_retakes, "preroll_max_us": self.preroll_max_us}

    def _note_enqueue(self, ms: float, spin_us: float, retakes: int = 0) -> None:
        """Count one timed call whose (last) take's host side took ``ms`` against a spin of ``spin_us`` (CUDA: spin
        launch to end event; CPU: the call), after ``retakes`` takes that outlasted their spins."""
        self.last_enqueue_ms = ms
        self.host_stats["calls"] += 1
        self.host_stats["retakes"] += retakes
        self.host_stats["max_enqueue_ms"] = max(self.host_stats["max_enqueue_ms"], ms)
        if self.is_cuda and ms > spin_us / 1e3:  # on CPU the host is the device: nothing to outlast
            self.host_stats["over_spin"] += 1

    def take_host_stats(self) -> dict[str, float]:
        """:attr:`host_stats` since the last take, then reset."""
        stats, self.host_stats = self.host_stats, empty_host_stats()
        return stats

    def sync(self) -> None:
        """Device-wide synchronize (every stream of the device), no-op on CPU."""
        self._sync(self.device)

    def time_call(self, fn: Callable[[], Any], *, flush: bool = True, warm: Sequence[Any] = ()) -> tuple[Any, float, float]:
        """Run ``fn`` once under the protocol; returns (result, ms, host_ms). ``warm``: the call's input tensors,
        whose pages are touched after the flush when :attr:`warm_pages` is on (outside the timed region).

        CUDA with a spin: when the host took longer to enqueue the call than the spin lasted, the device idled
        inside the events waiting for the host, and the time holds host latency (a compiled model's guards and
        launches outlasted the 200 us spin in nearly every call on a loaded H200 host, and its median then moved
        up to 75% between processes). Such a take is discarded and the call taken again (flush included) with a
        longer spin, at most :attr:`preroll_retakes` times; the last take's time is returned."""
        if not self.is_cuda:
            if flush:
                self.flush()
            self.sync()
            t0 = self._perf()
            out = fn()
            host_ms = (self._perf() - t0) * 1e3
            self._note_enqueue(host_ms, 0.0)
            return out, host_ms, host_ms
        spin_us, cycles = self.preroll_us, self._preroll_cycles
        for take in range(self.preroll_retakes + 1):
            out, ms, host_ms, enqueue_ms = self._take(fn, flush, warm, cycles)
            if (take == self.preroll_retakes or not cycles or enqueue_ms <= spin_us / 1e3
                    or spin_us >= self.preroll_max_us):
                break
            spin_us = next_spin_us(spin_us, enqueue_ms, self.preroll_max_us)
            cycles = self._cycles_for(spin_us)
        self._note_enqueue(enqueue_ms, spin_us, take)
        return out, ms, host_ms

    def _take(self, fn: Callable[[], Any], flush: bool, warm: Sequence[Any], cycles: int) -> tuple[Any, float, float, float]:
        """One CUDA take of ``fn`` behind a spin of ``cycles``: (result, ms, host_ms, enqueue_ms)."""
        import torch

        if flush:
            self.flush()
            if self.warm_pages and warm:
                warm_input_pages(warm)
        self.sync()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        after_sync = torch.cuda.Event(enable_timing=True)
        t_spin = self._perf()
        if cycles:
            torch.cuda._sleep(cycles)  # the device spins while the host enqueues the call below
        t0 = self._perf()
        start.record()
        out = fn()
        end.record()
        enqueue_ms = (self._perf() - t_spin) * 1e3
        self.sync()  # device-wide: work on side streams (T9) has finished when this returns
        after_sync.record()
        after_sync.synchronize()
        t1 = self._perf()
        event_ms = start.elapsed_time(end)
        synced_ms = start.elapsed_time(after_sync)
        host_ms = (t1 - t0) * 1e3
        # Work outside the events' stream (side streams) shows as GPU time between `end` and the event recorded
        # after the device-wide sync. Measured on the device, not the host clock, so a busy host (descheduled
        # process, slow wake-up) cannot inflate a time: the host clock only backs the reported figure (T8).
        ms = synced_ms if synced_ms > 1.5 * event_ms + 0.05 else event_ms
        return out, ms, host_ms, enqueue_ms

    @property
    def method(self) -> str:
        """Method id of this timer's raw times (:func:`method_id` without the net-of-overhead subtraction)."""
        return method_id("cuda" if self.is_cuda else "cpu", False)


def profiler_sum_ms(fn: Callable[[], Any], device: str, iters: int = 10, warmup: int = 5) -> float:
    """The CUDA-Agent release's method: torch.profiler, sum of device kernel time / iterations.

    Blind to launch gaps, host work and side streams; kept as a preset for comparison only.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    is_cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    if is_cuda:
        torch.cuda.synchronize()
    with profile(activities=acts) as prof:
        for _ in range(iters):
            fn()
        if is_cuda:
            torch.cuda.synchronize()
    events = prof.key_averages()
    if is_cuda:
        total_us = sum(getattr(e, "self_device_time_total", 0.0) or 0.0 for e in events)
    else:
        total_us = sum(e.self_cpu_time_total for e in events)
    return total_us / 1e3 / iters


def kernel_breakdown(fn: Callable[[], Any], device: str, top: int = 10) -> list[dict[str, Any]]:
    """Per-kernel (CUDA) or per-op (CPU) time of one call via torch.profiler, largest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    is_cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    with profile(activities=acts) as prof:
        fn()
        if is_cuda:
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        ms = (getattr(e, "self_device_time_total", 0.0) if is_cuda else e.self_cpu_time_total) / 1e3
        if ms > 0:
            rows.append({"name": e.key[:120], "ms": round(ms, 6), "calls": e.count})
    rows.sort(key=lambda r: -r["ms"])
    return rows[:top]
