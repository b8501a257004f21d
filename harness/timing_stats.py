"""Timing decisions of the trusted side: statistics, stopping rules, the device lock, the physical floor.

:func:`summarize` turns per-call samples into a :class:`~cuda_agent.schemas.Timing`, :func:`timing_done` decides
when an adaptive loop may stop, :class:`TimingLock` keeps one timed batch per GPU at a time with nothing beside it
(a file lock, so separate processes honour it: ``harness/device_lock.py``), :func:`speed_of_light_ms` is the physical floor (T22). The in-process timer the
child processes run is :class:`cuda_agent.harness.timing.DeviceTimer`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from cuda_agent.harness.device_lock import SharedHold, TimingLock, device_timing_lock  # noqa: F401 - re-exported
from cuda_agent.schemas.result import Timing

#: Generous device peaks (spec sheet, dense): (FLOP/s, bytes/s). A result under the floor is impossible.
DEVICE_PEAKS: dict[str, tuple[float, float]] = {
    "H200": (1.0e15, 4.9e12),
    "H100": (1.0e15, 3.4e12),
    "A100": (3.2e14, 2.1e12),
    "L40S": (7.4e14, 8.7e11),
    "B200": (2.3e15, 8.1e12),
}
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


def net_of_overhead(ms: float, overhead_ms: float) -> float:
    """``ms`` less the protocol's own cost of a call, never under :data:`NET_FLOOR_MS`; ``ms`` unchanged when the
    cost is over :data:`MAX_OVERHEAD_MS` (not measurable) or not positive."""
    if not 0 < overhead_ms <= MAX_OVERHEAD_MS:
        return ms
    return max(ms - overhead_ms, NET_FLOOR_MS)


def generation_hold(device: str) -> SharedHold | None:
    """What a policy generating on torch device ``device`` holds per batch: that device's lock in the shared mode
    (never beside a timed batch; beside other untimed work, other policies' generation included); None for a
    device nothing times."""
    lock = torch_device_timing_lock(device)
    return SharedHold(lock) if lock is not None else None


def torch_device_timing_lock(device: str) -> TimingLock | None:
    """The timing lock of torch device ``device`` ('cpu', 'cuda', 'cuda:1'), the one the cpu or cuda backend's
    evaluator times it under; None for another device type."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else (torch.cuda.current_device() if torch.cuda.is_available() else 0)
        return device_timing_lock("cuda", index)
    if dev.type == "cpu":
        return device_timing_lock("cpu", 0)
    return None


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


def timing_done(samples: Sequence[float], protocol: Any, elapsed_s: float) -> bool:
    """The stopping rule of an adaptive timing loop under ``protocol``
    (:class:`~cuda_agent.harness.timing_protocol.TimingProtocol`), ``elapsed_s`` after its budget started: the cap
    of calls; or a precise median once ``min_batch_s`` has passed; or, with at least ``min_calls``, the
    ``max_batch_s`` budget spent."""
    if len(samples) >= protocol.max_calls:
        return True
    if len(samples) >= protocol.min_calls and elapsed_s > protocol.max_batch_s:
        return True
    return elapsed_s >= protocol.min_batch_s and precise_enough(
        samples, min_calls=protocol.min_calls, max_calls=protocol.max_calls, target_rel_ci=protocol.target_rel_ci,
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
