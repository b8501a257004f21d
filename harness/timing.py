"""The in-process timer of the harness's child processes (candidate runner, reference process).

Protocol of one timed call (method ``events_l2flush`` on CUDA, ``host_sync`` on CPU): fresh inputs copied in, L2
flushed by writing a buffer larger than it, persisting-L2 lines reset, device-wide synchronize, then the call, then
a device-wide synchronize (side streams cannot escape, T9). On CUDA both event time and host time are taken; when
work ran outside the events' stream the device time up to the sync counts. The settings of a timer come in its
process's first message (:class:`~cuda_agent.harness.messages.TimerSpec`); the decisions made on its samples are
in :mod:`cuda_agent.harness.timing_stats`.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

# The spin's sizing rules live with the rule for blocked calls; imported here for the timer's callers.
from cuda_agent.harness.spin_policy import (SPIN_MARGIN, SpinPolicy, adaptive_spin_us,  # noqa: F401
                                            next_spin_us, timed_takes)

#: The longest spin (us) a retake or an adaptive spin may use when nothing else says. It covers the longest host
#: enqueue seen on KernelBench level 3 (LSTMBidirectional's eager call, 71 ms on a loaded H100 host) with room: under a
#: 5 ms cap (before session 37) every call of the launch-bound RNNs outlasted its spin on both sides, so their times
#: were host latency and an honest self-check read 0.71-0.80 (the runner's host path is a little slower).
DEFAULT_PREROLL_MAX_US = 500_000.0
#: The flush buffer's size in L2 multiples when nothing else says.
DEFAULT_FLUSH_MULTIPLE = 2.0
#: What :func:`l2_bytes` assumes where the device does not say (CUDA) and on CPU (a last-level cache's order).
FALLBACK_L2_BYTES = {"cuda": 50 * 2**20, "cpu": 16 * 2**20}
#: Stride of the inputs' page warm-up: one byte read per page of the caching allocator's large segments.
WARM_PAGE_BYTES = 2 << 20
#: Null calls (one element written) timed at a CUDA timer's start to measure the protocol's own cost per call.
OVERHEAD_CALLS = 64
#: How :meth:`DeviceTimer.flush` evicts the L2: 'write' fills a buffer twice the L2 (the lines left in the L2 are
#: dirty, and the timed call pays for writing them back as it evicts them); 'read' reads that buffer (clean lines:
#: evicting them costs nothing).
FLUSH_MODES = ("write", "read")


# ---------------------------------------------------------------------------- in-process timer
def l2_bytes(device: str) -> int:
    """The L2 cache's size of ``device`` ('cuda:N'; on CPU :data:`FALLBACK_L2_BYTES`)."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return FALLBACK_L2_BYTES["cpu"]
    props = torch.cuda.get_device_properties(dev)
    return int(getattr(props, "L2_cache_size", 0) or FALLBACK_L2_BYTES["cuda"])


def warm_input_pages(tensors: Sequence[Any]) -> None:
    """Read one byte of every :data:`WARM_PAGE_BYTES` page (and the last byte) of each tensor's storage.

    An L2 flush walks a buffer of twice the L2 and so also evicts the inputs' address translations from the GPU's
    TLBs; this makes them warm again while the data's lines stay out of the L2 but for one line per 2 MiB (0.006% of
    the bytes). Measured on the H200 (``benchmarks/_timing_variants.py``, 2026-12-01): on inputs written just before
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


def empty_host_stats() -> dict[str, float]:
    """:attr:`DeviceTimer.host_stats` with nothing counted yet."""
    return {"calls": 0, "over_spin": 0, "retakes": 0, "spin_blocked": 0, "max_enqueue_ms": 0.0}


def add_host_stats(total: dict[str, float], part: dict[str, float]) -> None:
    """Add the host statistics ``part`` into ``total`` (counts summed, the longest enqueue kept; the allocator's
    counts of a baseline's batch, where ``part`` has them, summed too)."""
    for k in ("calls", "over_spin", "retakes", "spin_blocked"):
        total[k] = total.get(k, 0) + part.get(k, 0)
    for k in ("alloc_retries", "ooms"):
        if k in part:
            total[k] = total.get(k, 0) + part[k]
    total["max_enqueue_ms"] = max(total["max_enqueue_ms"], part["max_enqueue_ms"])


def add_call_host(total: dict[str, float], enqueue_ms: float | None, spin_us: float | None, blocked: bool) -> None:
    """Count one of a runner's timed calls into ``total`` (Diagnostics.candidate_host) from what its reply says:
    its host enqueue, the spin it was timed behind and whether it was timed as spin-blocked (CUDA; nothing on CPU,
    where the reply has no spin)."""
    if enqueue_ms is None or not spin_us:
        return
    total["calls"] = total.get("calls", 0) + 1
    total["over_spin"] = total.get("over_spin", 0) + int(enqueue_ms * 1e3 > spin_us)
    total["spin_blocked"] = total.get("spin_blocked", 0) + int(blocked)
    total["max_enqueue_ms"] = max(total.get("max_enqueue_ms", 0.0), round(enqueue_ms, 3))


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
    :param flush_bytes: size of the cache-flush buffer; default ``flush_multiple`` times the L2 (:func:`l2_bytes`;
        CPU: 16 MiB).
    :param preroll_us: device spin before each timed call (CUDA), microseconds; 0 = none.
    :param flush_mode: one of :data:`FLUSH_MODES` (experiments; the harness always writes).
    :param warm_pages: after each flush, :func:`warm_input_pages` on the tensors :meth:`time_call` is given (CUDA).
    :param preroll_retakes: CUDA, with a spin: a call whose host enqueue outlasted its spin is taken again, at most
        this many times, with a longer spin (:func:`next_spin_us`); never for a candidate's call.
    :param preroll_max_us: the longest spin a retake or an adaptive spin uses.
    :param flush_multiple: the flush buffer's size in L2 multiples when ``flush_bytes`` is not given.
    :param spin_window: CUDA, with a spin: each call's (first take's) spin follows the host enqueue of this timer's
        last ``spin_window`` calls (:func:`adaptive_spin_us`), so that a host path longer than the fixed spin is
        covered from the next call on. A candidate's runner has no retakes, so this is all it has (0: its spin stays
        fixed and a launch-bound model's host time stays in its time); a baseline's timer retakes only the calls
        that outlast even this spin (0: every call of a launch-bound model starts at the fixed spin and is retaken,
        twice the device time).

    Calls whose host waits for the device (their enqueue grows with their spin) are timed behind ``preroll_us``
    and never retaken once :attr:`spin_policy` (or the policy :meth:`time_call` is given) marks them blocked
    (:mod:`cuda_agent.harness.spin_policy`).
    """

    def __init__(self, device: str, flush_bytes: int | None = None, preroll_us: float = 0.0,
                 flush_mode: str = "write", warm_pages: bool = False, preroll_retakes: int = 0,
                 preroll_max_us: float = DEFAULT_PREROLL_MAX_US, flush_multiple: float = DEFAULT_FLUSH_MULTIPLE,
                 spin_window: int = 0) -> None:
        import torch

        self.device = torch.device(device)
        self.preroll_us = float(preroll_us)
        if flush_mode not in FLUSH_MODES:
            raise ValueError(f"L2 flush mode {flush_mode!r} is not one of {list(FLUSH_MODES)}")
        if flush_multiple < 1:
            raise ValueError(f"flush_multiple {flush_multiple}: the flush must be at least the L2's size (>= 1)")
        self.flush_mode = flush_mode
        self.is_cuda = self.device.type == "cuda"
        self.warm_pages = bool(warm_pages) and self.is_cuda
        self.flags: list[str] = []
        if flush_bytes is None:
            flush_bytes = int(flush_multiple * l2_bytes(str(self.device)))
        if self.is_cuda:
            self.flush_buf = torch.empty(max(flush_bytes, 2**20) // 4, dtype=torch.int32, device=self.device)
            self._rt = _cudart()
            if self._rt is None:
                self.flags.append("persisting_l2_reset_unavailable")
        else:
            self.flush_buf = torch.empty(max(flush_bytes, 2**20) // 4, dtype=torch.int32)
            self._rt = None
        self.preroll_retakes = int(preroll_retakes)  # used with a spin only (without one, launch overhead is timed)
        self.preroll_max_us = max(float(preroll_max_us), self.preroll_us)
        self.spin_window = int(spin_window)
        #: The rule for calls whose host waits for the device, for calls :meth:`time_call` is given no policy for.
        self.spin_policy = SpinPolicy()
        #: CUDA: the spin (us) of the last timed call's last take, and whether that call was timed as spin-blocked.
        self.last_spin_us: float | None = None
        self.last_spin_blocked = False
        #: Host enqueue ms of the last :attr:`spin_window` timed calls (the adaptive spin's input).
        self.recent_enqueue_ms: deque[float] = deque(maxlen=max(1, self.spin_window))
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

    @classmethod
    def from_spec(cls, device: str, spec: Any, *, retakes: bool = True) -> DeviceTimer:
        """A timer following ``spec`` (:class:`~cuda_agent.harness.messages.TimerSpec`, the protocol's per-process
        part); ``retakes=False`` for a candidate's runner, whose calls are never taken twice: its spin adapts to its
        recent host enqueue instead (``spec.candidate_spin_window``). A baseline's timer adapts its first take's
        spin the same way (``spec.baseline_spin_window``) and retakes what outlasts it."""
        return cls(device, preroll_us=spec.preroll_us, warm_pages=spec.warm_input_pages,
                   preroll_retakes=spec.preroll_retakes if retakes else 0, preroll_max_us=spec.preroll_max_us,
                   flush_multiple=spec.l2_flush_multiple,
                   spin_window=spec.baseline_spin_window if retakes else spec.candidate_spin_window)

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
                "preroll_retakes": self.preroll_retakes, "preroll_max_us": self.preroll_max_us,
                "spin_window": self.spin_window,
                "recent_enqueue": [id(self.recent_enqueue_ms), self.recent_enqueue_ms.maxlen],
                "spin_policy": [id(self.spin_policy), type(self.spin_policy).__qualname__]}

    def _note_enqueue(self, ms: float, spin_us: float, retakes: int = 0, blocked: bool = False) -> None:
        """Count one timed call whose (last) take's host side took ``ms`` against a spin of ``spin_us`` (CUDA: spin
        launch to end event; CPU: the call), after ``retakes`` takes that outlasted their spins; ``blocked``: it was
        timed behind the base spin as a spin-blocked call."""
        self.last_enqueue_ms = ms
        self.last_spin_us, self.last_spin_blocked = spin_us, blocked
        self.host_stats["calls"] += 1
        self.host_stats["retakes"] += retakes
        self.host_stats["spin_blocked"] += int(blocked)
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

    def time_call(self, fn: Callable[[], Any], *, flush: bool = True, warm: Sequence[Any] = (),
                  policy: SpinPolicy | None = None) -> tuple[Any, float, float]:
        """Run ``fn`` once under the protocol; returns (result, ms, host_ms). ``warm``: the call's input tensors,
        whose pages are touched after the flush when :attr:`warm_pages` is on (outside the timed region);
        ``policy``: ``fn``'s :class:`SpinPolicy` (default :attr:`spin_policy`; a baseline keeps one per kind).

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
        def take(spin_us: float) -> tuple[tuple[Any, float, float], float]:
            out, ms, host_ms, enqueue_ms = self._take(fn, flush, warm, self._cycles_for(spin_us))
            return (out, ms, host_ms), enqueue_ms

        done = timed_takes(take, self.spin_policy if policy is None else policy,
                           base_us=self.preroll_us if self._preroll_cycles else 0.0,
                           recent_enqueue_ms=self.recent_enqueue_ms, max_us=self.preroll_max_us,
                           window=self.spin_window, retakes=self.preroll_retakes)
        self._note_enqueue(done.enqueue_ms, done.spin_us, done.retakes, done.blocked)
        self.recent_enqueue_ms.append(done.enqueue_ms)
        return done.result

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
        """Method id of this timer's raw times: 'events_l2flush' (CUDA) or 'host_sync' (CPU)."""
        return "events_l2flush" if self.is_cuda else "host_sync"
