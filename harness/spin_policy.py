"""The pre-roll spin's sizing rules, and the rule for calls whose host blocks on the device (``spin_blocked``).

The timer (:class:`~cuda_agent.harness.timing.DeviceTimer`) enqueues a GPU spin before each timed call so that the
host's enqueue of the call is hidden: while the device spins, the host enqueues the call behind it, and the events
around the call time device work only. A spin sized to the host's enqueue covers it (:func:`adaptive_spin_us` for a
call's first take, :func:`next_spin_us` for a baseline's retake).

That only works while the host does not wait for the device inside the call. A call that synchronises (a
``.item()``, a copy to or from pageable host memory, a ``cudaStreamSynchronize`` in a library), or one that launches
more kernels than the device's launch queue holds (thousands: the queue fills while the device spins, and each
further launch waits for room), holds its host until the spin has run, so its enqueue is the spin plus its own host path: the adaptive spin (1.5 times the enqueue) grows
call after call up to ``preroll_max_us`` and never covers it. KernelBench's level-3 LSTMs show that signature in
session 38's H200 rows: every eager call over its spin on both sides, enqueues of 143-186 ms against a 120 ms cap
(the cap plus 20-60 ms, their eager time); which call inside cuDNN's RNN path waits is for a GPU trace to say
(``benchmarks/host_sync_parity.py``). A longer spin hides nothing there (what follows the host's wait is enqueued
after the spin whatever its length) and costs the device up to 500 ms per call.

:class:`SpinPolicy` detects such a call from its takes: over-spin takes whose enqueue grows with their spin (by at
least :data:`BLOCKED_SLOPE` of the spin's growth, in :data:`CONFIRMATIONS` steps in a row) mark it ``spin_blocked``,
and from then on each of its calls is timed behind the protocol's base spin (``preroll_us``) and never retaken. The
same rule runs in the baseline's timer and in the candidate's runner, each on its own calls: a self-check's blocked
model is timed the same way on both sides, and neither side's state reaches the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

#: A spin sized to cover a host enqueue lasts this many times it (the same host path again, a little slower, is
#: still covered): a baseline's retake (:func:`next_spin_us`), a candidate's adaptive spin (:func:`adaptive_spin_us`).
SPIN_MARGIN = 1.5
#: Two over-spin takes are compared only when their spins differ by at least this factor (smaller differences are
#: within a host's jitter).
MIN_SPIN_RATIO = 1.25
#: An over-spin take confirms blocking when its enqueue moved by at least this share of its spin's change from the
#: previous over-spin take (a blocked call's enqueue moves by all of it; a host path that does not wait, by none).
BLOCKED_SLOPE = 0.5
#: Part of every CUDA baseline's cache key (harness/baselines.py): a baseline timed before the rule (or under another
#: version of it) is never reused.
SPIN_RULE_VERSION = 1
#: Confirming steps in a row that mark a call ``spin_blocked``: two, so that one jump of a busy host (a descheduled
#: process) is not enough; a blocked call confirms in its first three over-spin takes.
CONFIRMATIONS = 2


def next_spin_us(spin_us: float, enqueue_ms: float, max_us: float) -> float:
    """The spin of a retake after a take whose host enqueue (``enqueue_ms``) outlasted its ``spin_us``: twice the
    spin, or 1.5 times the enqueue if that is longer (a host path that long again is then covered), at most
    ``max_us``."""
    return min(max_us, max(2.0 * spin_us, SPIN_MARGIN * enqueue_ms * 1e3))


def adaptive_spin_us(base_us: float, recent_enqueue_ms: Iterable[float], max_us: float) -> float:
    """The spin of a call's first take: 1.5 times the longest host enqueue of its recent calls, at least the
    protocol's ``base_us`` and at most ``max_us``. A baseline's call whose host side outlasts its spin is retaken
    behind a longer spin (:func:`next_spin_us`); a candidate's never is (it would run again on the same data), so
    its spin follows its own host path from call to call instead, and both are timed as device work. A call whose
    host side outlasts even this spin keeps that host time in its time (it can only lower the candidate's speedup)."""
    longest = max(recent_enqueue_ms, default=0.0)
    return min(max_us, max(base_us, SPIN_MARGIN * longest * 1e3))


class SpinPolicy:
    """Whether one timed function's host waits for the device inside its calls, learnt from its takes.

    Feed it every take made behind a spin (:meth:`observe`); ask it for the spins (:meth:`first_spin_us`,
    :meth:`retake_spin_us`). Once :attr:`blocked`, it stays so (blocking is a property of the code: a call that
    synchronised once will again) until :meth:`reset`. A baseline keeps one per kind ('eager', 'compile'); a
    candidate runner one for its candidate.
    """

    def __init__(self) -> None:
        #: The function's calls wait for the device: they are timed behind the base spin, never retaken.
        self.blocked = False
        #: The over-spin takes (spin us, enqueue ms) that marked it blocked, oldest first (for the record).
        self.evidence: list[tuple[float, float]] = []
        self._anchor: tuple[float, float] | None = None  # the last over-spin take a spin change is measured from
        self._confirmed = 0

    def reset(self) -> None:
        """Forget everything (a new function is timed)."""
        self.blocked, self.evidence, self._anchor, self._confirmed = False, [], None, 0

    def observe(self, spin_us: float, enqueue_ms: float) -> bool:
        """One take behind a spin of ``spin_us`` whose host enqueue (spin launch to end event) took ``enqueue_ms``;
        returns :attr:`blocked`.

        A take the spin covered resets the count (the host did not wait for the spin). An over-spin take whose spin
        differs from the last over-spin take's by at least :data:`MIN_SPIN_RATIO` confirms when the enqueue moved by
        at least :data:`BLOCKED_SLOPE` of the spin's change, and resets the count otherwise; a smaller spin change
        tells nothing and leaves the count as it is."""
        if self.blocked or spin_us <= 0:
            return self.blocked
        if enqueue_ms * 1e3 <= spin_us:
            self._anchor, self._confirmed = None, 0
            self.evidence = []
            return False
        if self._anchor is None:
            self._anchor, self.evidence = (spin_us, enqueue_ms), [(spin_us, enqueue_ms)]
            return False
        s0, e0 = self._anchor
        if max(spin_us, s0) < MIN_SPIN_RATIO * min(spin_us, s0):
            return False
        if (enqueue_ms - e0) * 1e3 / (spin_us - s0) >= BLOCKED_SLOPE:
            self._confirmed += 1
            self.evidence.append((spin_us, enqueue_ms))
        else:
            self._confirmed, self.evidence = 0, [(spin_us, enqueue_ms)]
        self._anchor = (spin_us, enqueue_ms)
        self.blocked = self._confirmed >= CONFIRMATIONS
        return self.blocked

    def first_spin_us(self, base_us: float, recent_enqueue_ms: Iterable[float], max_us: float, window: int) -> float:
        """The spin of a call's first take: ``base_us`` for a blocked function or without a window, else
        :func:`adaptive_spin_us`."""
        if self.blocked or not window or base_us <= 0:
            return base_us
        return adaptive_spin_us(base_us, recent_enqueue_ms, max_us)

    def retake_spin_us(self, spin_us: float, enqueue_ms: float, max_us: float) -> float | None:
        """After a take (already :meth:`observe`\\ d): the spin of a retake, or None when none is due (the spin
        covered the host, the spin is at ``max_us``, or the function is blocked: a longer spin hides nothing)."""
        if self.blocked or spin_us <= 0 or enqueue_ms * 1e3 <= spin_us or spin_us >= max_us:
            return None
        return next_spin_us(spin_us, enqueue_ms, max_us)


class TakenCall(NamedTuple):
    """What :func:`timed_takes` did for one call."""

    result: Any  # what the last take's ``take`` returned first
    enqueue_ms: float  # the last take's host enqueue
    spin_us: float  # the spin the last take ran behind (0: no spin)
    retakes: int  # takes before the last one
    blocked: bool  # the call was timed as spin-blocked (its policy said so before it started)


def timed_takes(take: Callable[[float], tuple[Any, float]], policy: SpinPolicy, *, base_us: float,
                recent_enqueue_ms: Iterable[float], max_us: float, window: int, retakes: int) -> TakenCall:
    """One timed call's takes under the spin rules (the timer's loop, :meth:`DeviceTimer.time_call
    <cuda_agent.harness.timing.DeviceTimer.time_call>`): ``take(spin_us)`` runs the call once behind that spin and
    returns (its result, its host enqueue ms). The first take's spin is :meth:`SpinPolicy.first_spin_us`; every take
    is observed; a retake follows while :meth:`SpinPolicy.retake_spin_us` asks for one, at most ``retakes`` (0 for
    a candidate). ``base_us`` 0: no spin at all, one take, nothing observed."""
    blocked = policy.blocked and base_us > 0
    spin_us = policy.first_spin_us(base_us, recent_enqueue_ms, max_us, window)
    n = 0
    for n in range(retakes + 1):
        result, enqueue_ms = take(spin_us)
        if base_us <= 0:
            break
        policy.observe(spin_us, enqueue_ms)
        longer = policy.retake_spin_us(spin_us, enqueue_ms, max_us)
        if n == retakes or longer is None:
            break
        spin_us = longer
    return TakenCall(result, enqueue_ms, spin_us, n, blocked)
