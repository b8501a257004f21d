"""The parent's wall clock against what a candidate's reported times leave of it (T8, outside the candidate's process).

Every time a candidate is credited with is read inside its own process (host clock on CPU), so native code there
that writes its process's memory can make the timer report less than the call took without replacing a function
the guards watch: session 42's timer red team scaled every Python float equal to 1000.0 in the runner (the ``1e3`` of
``host_ms = (perf() - t0) * 1e3``, found by scanning readable memory through a pipe's ``write``) and an honest GEMM at
0.6x eager was graded reward 2 at 3.4x (tests/integrity/test_redteam_s42_timer.py). The wall-clock check of each
call (``T8.outside.wall_clock``) bounds a reported time only from above.

This bounds it from below. The parent times each timed call's round trip to the runner (``Session.call``'s wall,
before the output checks), so for every call it knows the part of its wall the reported time leaves unaccounted:
the harness's own work around the timed region (input copy, NaN poison, cache flush, output description, input
fingerprints, the messages), plus whatever the timer did not count. The baselines run the same timer (the same
flush) in the reference process, where no candidate code runs; the parent times each baseline batch too, so each
grading round also says what the timer's path costs per call right now, under the machine's present load. A
candidate whose calls leave much more unaccounted than that, more than the runner's extra work (per-call messages,
copies and SHA-256 fingerprints of the inputs and outputs) can explain, is timing something off the books.

Rule per round: the median over the round's timed calls of ``wall - reported`` (``u_c``) against
``ALPHA * u_b + BETA_MS + io_bytes * max(HASH_MULTIPLE * sha256_per_byte, KAPPA * u_b / flush_bytes)
+ DELTA * median(reported)``, with ``u_b`` the baseline batches' unaccounted wall per call (their warm-up calls
counted at the batch's median), ``io_bytes`` one set's inputs and outputs and ``sha256_per_byte`` what hashing costs
in the parent when the pass is judged. The pass is refused (``T8.runtime.timer_patched``, flag ``unaccounted_wall``)
when the median over its rounds of the excess is over zero, so one round slowed by load never decides. CPU backend
only: on CUDA the timed region is the device's events and the wall also holds the host's enqueue, the pre-roll spin
(adaptive, up to ``preroll_max_us``) and the synchronize, so the margin an honest call needs is not known without
measurements on a GPU.

Measured on this 2-core CPU host with other work beside (34 honest grading passes: the five KernelBench solutions
at reduced sizes in standard_fast and standard, the five example CPU solutions, the swish example at 8, 32 and
128 MiB of inputs and outputs, a GEMM 300 times over at 36-80 ms a call): every pass's median round stayed at least
7.8 ms under its allowance, every single round's allowance was at least 2.2 times what its calls left (4 times on a
quieter host), even with the SHA-256 term left out. The GEMM 300 times over reporting a thousandth of its time left
38-60 ms a call where 11-22 ms were allowed: refused in all 3 runs with the rule on. Cost: a few perf_counter reads
a call and 10-25 ms of hashing a pass.

What it cannot see: time hidden under the allowance, about 10-20 ms a call on that host (the CPU timer's 32 MiB flush
alone takes 1-15 ms a call), so a kernel whose calls take a few milliseconds can still lie by its whole time (the
GEMM at reduced size, 0.2 ms, reporting a fifth: still reward 2). The rule stops the lie on kernels slower than the
harness's own cost per call and bounds it everywhere else to about the allowance per call.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_agent.harness.session import Session

#: The candidate's path may leave this many times the baselines' unaccounted wall per call (its own messages and
#: bookkeeping each call, where the baselines make one request per batch). Measured on honest CPU runs (2 cores,
#: other work beside, inputs and outputs under 1 MiB): the ratio of the medians was 0.2-2.4 a round, the difference
#: at most 6.9 ms.
ALPHA = 4.0
#: ... plus this many milliseconds a call (a message round trip on a loaded host; JSON of the reply).
BETA_MS = 5.0
#: ... plus the runner's per-byte work on each call's inputs and outputs (staging copy, NaN poison, SHA-256
#: fingerprints, freeing): HASH_MULTIPLE times what SHA-256 costs a byte in the parent now (measured on honest CPU
#: runs: 1.3-1.5 ns a byte of inputs and outputs in the runner, 0.6-1.8 ns a byte hashed in the parent), and at least
#: KAPPA bytes of the baselines' flush write a byte (that figure grows with the host's load).
HASH_MULTIPLE = 6.0
KAPPA = 30.0
#: ... plus this fraction of the reported median (noise that grows with the call's length).
DELTA = 0.25
#: Rounds with fewer timed calls than this are not judged (their median is one or two calls).
MIN_CALLS = 3


@dataclass
class RoundWall:
    """One grading round's walls: the candidate's timed calls, then its baselines' batches."""

    #: (the parent's wall of the runner's round trip, the reported ms) of each timed call of the candidate.
    calls: list[tuple[float, float]] = field(default_factory=list)
    #: (the parent's wall of the batch, its samples, its warm-up calls) of each baseline batch of the round.
    baselines: list[tuple[float, list[float], int]] = field(default_factory=list)


@dataclass
class RoundExcess:
    """What one round says: the candidate's and the baselines' unaccounted wall per call, the allowance, the excess."""

    u_c: float
    u_b: float
    allowance: float
    reported: float

    @property
    def excess(self) -> float:
        return self.u_c - self.allowance


def baseline_overhead_ms(wall_ms: float, samples: list[float], warmup: int) -> float | None:
    """Unaccounted wall per call of one baseline batch (its warm-up calls counted at the samples' median; a warm-up
    slower than that only adds to this figure, which makes the allowance larger). None without samples."""
    if not samples:
        return None
    calls = len(samples) + max(0, warmup)
    return max(0.0, wall_ms - sum(samples) - max(0, warmup) * statistics.median(samples)) / calls


def allowance_ms(u_b: float, io_bytes: int, flush_bytes: int, reported_ms: float, hash_ms_per_byte: float) -> float:
    """What an honest call's wall may leave unaccounted, given the baselines' ``u_b`` per call this round and what
    SHA-256 costs a byte here (``hash_ms_per_byte``, :func:`hash_ms_per_byte`)."""
    per_byte = max(HASH_MULTIPLE * hash_ms_per_byte, KAPPA * u_b / flush_bytes if flush_bytes > 0 else 0.0)
    return ALPHA * u_b + BETA_MS + per_byte * io_bytes + DELTA * reported_ms


def hash_ms_per_byte(nbytes: int = 4 << 20, repeats: int = 3) -> float:
    """Milliseconds SHA-256 takes a byte in this (the trusted) process now: the median of ``repeats`` hashes of
    ``nbytes`` (about 10-25 ms in all on a 2-core host)."""
    buf = bytes(nbytes)
    took = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        hashlib.sha256(buf).digest()
        took.append(time.perf_counter() - t0)
    return statistics.median(took) * 1e3 / nbytes


def round_excess(rw: RoundWall, io_bytes: int, flush_bytes: int, hash_ms: float) -> RoundExcess | None:
    """The round's figures, or None when it cannot be judged (too few calls, no baseline batch)."""
    if len(rw.calls) < MIN_CALLS:
        return None
    overheads = [o for o in (baseline_overhead_ms(w, s, wu) for w, s, wu in rw.baselines) if o is not None]
    if not overheads:
        return None
    u_b = max(overheads)  # the more lenient of the kinds (the compiled model's batch is not slower per call to run)
    u_c = statistics.median(w - r for w, r in rw.calls)
    reported = statistics.median(r for _, r in rw.calls)
    return RoundExcess(u_c=u_c, u_b=u_b, allowance=allowance_ms(u_b, io_bytes, flush_bytes, reported, hash_ms),
                       reported=reported)


def judge(rounds: list[RoundWall], io_bytes: int, flush_bytes: int,
          hash_ms: float) -> tuple[float, list[RoundExcess]] | None:
    """(the median excess over the judged rounds, their figures), or None when no round could be judged."""
    judged = [e for e in (round_excess(r, io_bytes, flush_bytes, hash_ms) for r in rounds) if e is not None]
    if not judged:
        return None
    return statistics.median(e.excess for e in judged), judged


def io_bytes_of(sess: Session) -> int:
    """Bytes of one set's inputs and outputs (each copied or poisoned, and fingerprinted, on every call)."""
    import math

    k = next(iter(sess.sets.indices()), None)
    out = 0
    if k is not None:
        for o in sess.sets[k].outputs:
            if o.shape is not None and o.dtype is not None:
                out += math.prod(o.shape) * _itemsize(o.dtype)
    return int(sess.sets.input_bytes()) + out


def _itemsize(dtype: str) -> int:
    import torch

    try:
        return int(getattr(torch, dtype).itemsize)
    except (AttributeError, TypeError):
        return 8


def flush_bytes_of(sess: Session) -> int:
    """Bytes the CPU timer's flush writes before each call (harness/timing.py)."""
    from cuda_agent.harness.timing import FALLBACK_L2_BYTES

    return int(sess.ctx.protocol.timer.l2_flush_multiple * FALLBACK_L2_BYTES["cpu"])


#: Whether :func:`check` refuses a candidate (tests switch it off to show what it stops).
ENABLED = True


def check(sess: Session, rounds: list[RoundWall]) -> Any:
    """Judge a grading pass's rounds (CPU backend only); a violation and the flag ``unaccounted_wall`` when the
    candidate's calls leave more of the parent's wall unaccounted than the harness's own work explains. Returns
    :func:`judge`'s figures (None where not judged)."""
    if sess.ctx.kind == "cuda" or not ENABLED:
        return None
    flush = flush_bytes_of(sess)
    io = io_bytes_of(sess)
    got = judge(rounds, io, flush, hash_ms_per_byte())
    if got is None:
        return None
    excess, judged = got
    if excess > 0:
        from cuda_agent.harness.messages import Violation

        mid = sorted(judged, key=lambda e: e.excess)[len(judged) // 2]
        sess.flags.append("unaccounted_wall")
        sess.violations.append(Violation(
            rule="T8.runtime.timer_patched",
            message=(f"the timed calls left {mid.u_c:.3f} ms a call of the harness's wall clock unaccounted (median "
                     f"call, reported {mid.reported:.4f} ms) where the harness's own work explains at most "
                     f"{mid.allowance:.3f} ms (the baselines' timer path: {mid.u_b:.3f} ms a call), in "
                     f"{sum(e.excess > 0 for e in judged)} of {len(judged)} rounds: the reported times do not count "
                     "all of the call's work (a timer changed in the candidate's process)")))
    return got
