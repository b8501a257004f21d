"""Timed calls of a session: rotation over input sets, spot checks, fresh sets, and the second look at a gap.

:func:`time_candidate` runs one timed batch under the device's lock: warm-up calls, then calls rotating over the
session's sets (the same addresses with different data each call), every k-th spot-checked from a secret offset
(or, for a fixed number of calls with a cap, a random subset), and, at secret positions, calls on sets made for that
call alone and handed over just before it (harness/fresh_sets.py); in a grading pass also, at secret positions, checked
calls on its widened sets whose times are dropped (harness/widened_run.py). :func:`settle_fresh_sets` applies the fresh-set
rule to the samples: a gap between the fresh calls and their rotated neighbours is looked at again in one more
batch of the same form before it counts.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cuda_agent.harness.fresh_sets import (
    FRESH_ABS_SLACK_MS,
    NEIGHBOURS,
    fresh_charge,
    fresh_count,
    fresh_pairs,
    fresh_positions,
    fresh_summary,
    slower_on_fresh,
)
from cuda_agent.harness.reference_sets import ReferenceError_
from cuda_agent.harness.timing_stats import timing_done
from cuda_agent.harness.widened_run import call_again
from cuda_agent.schemas.result import FreshSetsInfo

if TYPE_CHECKING:
    from cuda_agent.harness.session import Session
    from cuda_agent.harness.widened_run import Recall


def fitted_calls(calls: int, warm_ms: float, budget_s: float | None) -> int:
    """Rotated calls of a fixed-size batch cut to fit ``budget_s`` at ``warm_ms`` per call (the warm-up call's
    time), never below :data:`MIN_FITTED_CALLS` nor above ``calls``; ``calls`` when there is no budget."""
    if budget_s is None or warm_ms <= 0:
        return calls
    return max(min(calls, MIN_FITTED_CALLS), min(calls, int(budget_s * 1e3 / warm_ms)))


#: Rotated calls a fixed-size batch keeps however slow the candidate (the median of a grading pass stays one of
#: several calls per round).
MIN_FITTED_CALLS = 5


def time_candidate(sess: Session, ks: list[int], *, calls: int | None = None, max_checks: int | None = None,
                   fresh_calls: int | None = None, budget_s: float | None = None,
                   widened: list[Recall] = ()) -> tuple[list[float], float]:  # type: ignore[assignment]
    """One timed batch rotating over ``ks`` (``calls`` rotated calls, or until the protocol's stopping rule);
    returns (ms samples, wall ms). Fresh-set calls (default :func:`fresh_count`) are samples too; any not reached
    before the batch ends are made at its end. Each fresh call's time and its rotated neighbours' go to
    ``sess.fresh_pairs``.

    ``budget_s`` (fixed ``calls`` only): the warm-up call is timed and the rotated calls are cut to what fits the
    budget at that pace (:func:`fitted_calls`), before the checked calls and fresh positions are drawn over them, so
    a batch cut short is checked as densely as a full one (a slow warm-up buys fewer calls, not fewer checks per
    call)."""
    p = sess.ctx.protocol
    samples: list[float] = []
    offset = secrets.randbelow(p.spot_check_every)
    if fresh_calls is None:
        fresh_calls = fresh_count(sess.ctx.integrity.fresh_set_calls, sess.sets.input_bytes())
    fresh = fresh_sets(sess, fresh_calls)
    sess.batch_walls = []
    checks = 0
    wall_ms = 0.0
    sequence: list[tuple[bool, float]] = []  # (on a fresh set, ms) in call order

    def timed(k: int, check: bool, is_fresh: bool) -> None:
        nonlocal wall_ms
        t0 = time.perf_counter()
        ms = sess.call(k, check=check)
        wall_ms += (time.perf_counter() - t0) * 1e3
        samples.append(ms)
        sess.batch_walls.append(sess.last_call_wall)
        sequence.append((is_fresh, ms))

    with sess.ctx.lock:
        start = time.monotonic()  # the budget starts once the device is ours
        warm_ms = 0.0
        for j in range(p.warmup_calls if calls is None else 1):
            t0 = time.perf_counter()
            sess.call(ks[j % len(ks)], check=False)
            warm_ms = (time.perf_counter() - t0) * 1e3
        if calls is not None:
            calls = fitted_calls(calls, warm_ms, budget_s)
        # A fixed number of calls with a cap: the checked calls are a random subset of all of them (a cap on the
        # every-k-th rule would check only the first calls, which a kernel could count).
        drawn = (set(secrets.SystemRandom().sample(range(calls), min(max_checks, calls)))
                 if calls is not None and max_checks is not None else None)
        fresh_at = set(fresh_positions(calls if calls is not None else p.min_calls, len(fresh), NEIGHBOURS))
        # One call at a secret position runs under the op audit (its time is dropped): torch compute reached only
        # on timed calls, past the audited verification calls a counter can step round, is refused here too.
        # (not in the suite self-check: the task's own Model computes with torch there, and the audit's profiler would
        # only add its cost to the timed batch)
        audit_at = -1 if sess.torch_compute_allowed else secrets.randbelow(calls if calls is not None else p.min_calls)
        recall_at: dict[int, list[Recall]] = {}
        waiting: list[Recall] = []
        for w in widened:
            recall_at.setdefault(secrets.randbelow(calls if calls is not None else p.min_calls), []).append(w)
        j = 0
        while True:
            if calls is not None and j >= calls:
                break
            if calls is None and timing_done(samples, p, time.monotonic() - start):
                break
            if j in fresh_at and fresh:  # before the j-th rotated call, an extra one on a new set
                fk = hand_over(sess, fresh.pop(0))
                timed(fk, True, True)
                if sess.failed:
                    break
                sess.release(fk)  # memory-aware sessions free it on both sides at once
                for w in waiting:  # recalls made at their position waited for the fresh set's memory
                    if not sess.failed:
                        call_again(sess, w)
                waiting.clear()
                if sess.failed:
                    break
            if drawn is not None:
                check = j in drawn
            else:
                check = j % p.spot_check_every == offset and (max_checks is None or checks < max_checks)
            checks += check
            sess.diagnostics.spot_checks += int(check)
            if j == audit_at:
                sess.call(ks[(j + offset) % len(ks)], check=True, audit=True)
                if sess.failed:
                    break
            for w in recall_at.pop(j, ()):
                if w.k is None and fresh:  # made at its position: never beside a fresh set still to be called
                    waiting.append(w)
                    continue
                call_again(sess, w)
                if sess.failed:
                    break
            if sess.failed:
                break
            timed(ks[(j + offset) % len(ks)], check, False)
            j += 1
            if sess.failed:
                break
        while fresh and not sess.failed:
            fk = hand_over(sess, fresh.pop(0))
            timed(fk, True, True)
            if not sess.failed:
                sess.release(fk)
        for w in waiting + [w for ws in recall_at.values() for w in ws]:  # waiting, or past a batch the stop ended
            if sess.failed:
                break
            call_again(sess, w)
    sess.fresh_pairs += fresh_pairs(sequence)
    return samples, wall_ms


def fresh_sets(sess: Session, count: int) -> list[int]:
    """``count`` sets from fresh secret seeds, made by the reference but not handed over yet (:func:`hand_over`,
    just before each one's call). Where descriptors are used they are staged now, outside the device lock, in memory
    files or device allocations no one else can reach; otherwise at hand-over, through files."""
    t = time.perf_counter()
    ks = [sess.sets.make(secrets.randbits(31), "fresh", stage=False, transport=sess.output_mode) for _ in range(count)]
    transport = sess.ctx.transport
    kind = transport.fresh_set_kind(sess.runner.isolation)
    for k in ks if kind else ():
        try:
            vmm_error = sess.sets.stage_fds(k, kind == "vmm")
        except ReferenceError_ as exc:
            if not sess.reference.alive:
                raise
            transport.fd_failed("memfd", f"the reference could not stage a set: {exc}")
            break
        if vmm_error:
            transport.fd_failed("vmm", f"the reference could not export device memory: {vmm_error}")
    sess.tick("fresh_sets", t)
    return ks


def hand_over(sess: Session, k: int) -> int:
    """Give set ``k`` to the runner now: its descriptors where it was staged in memory files or device allocations,
    else staged now through the exchange folder's reusable slots (files, or IPC handles); returns ``k``."""
    t = time.perf_counter()
    sess.diagnostics.fresh_hand_overs += 1
    sess.make_room_in_runner(keep=(k,))
    fds = sess.sets.take_fds(k)
    if fds is not None and hand_over_fds(sess, k, fds):
        sess.tick("fresh_hand_over", t)
        return k
    sess.sets.stage(k, sess.output_mode, reuse=True)
    sess.send_inputs(k)
    sess.tick("fresh_hand_over", t)
    return k


def hand_over_fds(sess: Session, k: int, fds: list[int]) -> bool:
    """Pass set ``k``'s descriptors and its description to the runner; False when it could not read them (the
    caller hands the set over through files)."""
    from cuda_agent.harness._vmm import close_fds
    from cuda_agent.harness.wire import Failure

    kind = "vmm" if any(d.vmm for d in sess.sets[k].tensors) else "memfd"
    try:
        sess.runner.send_fds(fds)
        reply = sess.runner.inputs(k, sess.sets[k].tensors)
    except OSError as exc:
        reply = Failure(error=f"descriptors not sent: {exc}", fd_error=True)
    finally:
        close_fds(fds)
    if not isinstance(reply, Failure):
        sess.sets.handed_over(k)
        sess.ctx.transport.fd_worked(kind)
        return True
    sess.diagnostics.fresh_set_fallbacks.append(f"{kind}: {reply.error[:200]}")
    sess.ctx.transport.fd_failed(kind, f"the runner could not read a set: {reply.error}")
    return False


def slower_than_reported(pairs: list[tuple[float, float]], samples: list[float], slack: float) -> bool:
    """Whether the fresh calls of ``pairs`` ran slower than the time ``samples`` would report (their median) by more
    than ``slack`` (and :data:`~cuda_agent.harness.fresh_sets.FRESH_ABS_SLACK_MS`).

    The neighbour rule (:func:`~cuda_agent.harness.fresh_sets.slower_on_fresh`) compares each fresh call with the
    rotated calls just before it, so that a drift over the batch opens no gap; it says nothing of the calls after the
    last fresh call. Those are most of a pass where the fresh calls come early: a big working set has one fresh call
    in all, in the first round, and ``standard_fast``'s rounds after the third have none. Session 42's red team kept
    a content cache honest (and its seen sets slow) until its fresh call was behind it, then copied the stored
    answers: the neighbour rule saw no gap and a GEMM at 0.5x eager was graded reward 2. The time a pass reports
    is its samples' median, so the fresh calls are compared with that too: a candidate faster on the sets it has
    seen than on new data is slower on its fresh calls than on what it would be credited with."""
    if not pairs or not samples:
        return False
    fresh = statistics.median(f for f, _ in pairs)
    reported = statistics.median(samples)
    return fresh > (1.0 + slack) * reported and fresh - reported > FRESH_ABS_SLACK_MS


def _gap(pairs: list[tuple[float, float]], samples: list[float], slack: float) -> bool:
    """The fresh-set rule's gap: fresh calls slower than their rotated neighbours or than the reported time."""
    return slower_on_fresh(pairs, slack) or slower_than_reported(pairs, samples, slack)


def settle_fresh_sets(sess: Session, samples: list[float], confirm: Callable[[], list[float]]) -> list[float]:
    """The candidate's timed samples after the fresh-set rule (harness/fresh_sets.py).

    ``samples`` as they are unless its calls on never-seen sets (of every batch so far) ran slower than the rotated
    calls just before them, or than the median of ``samples`` (:func:`slower_than_reported`), by more than
    ``fresh_set_slack``. Then ``confirm()`` runs one more batch of the same form and its fresh calls decide, by the
    neighbour rule alone: slower again, the fresh calls' times of both looks (flag ``fresh_inputs_slower``); not
    slower, the confirming batch's samples. The median comparison only asks for the confirmation: honest calls can
    sit in a slow stretch of a batch (replayed on the 181 GPU self-check rows of ``gpu-state/kb_check`` that keep
    their samples, 5 had fresh calls over 5% slower than the samples' median, 7_GoogleNetInceptionV1 by 49%, while
    no slower than their neighbours), and a charge on that would take speed reward from honest work. A cache that
    switched on after the first look's fresh calls is copying by the confirmation, so its fresh calls there are
    slower than the copied calls around them."""
    first = sess.fresh_pairs
    if not first:
        return samples
    slack = sess.ctx.protocol.fresh_set_slack
    if not _gap(first, samples, slack):
        sess.diagnostics.fresh_sets = FreshSetsInfo(**fresh_summary(first, "all"))
        return _charged(sess, samples, first, slack)
    sess.fresh_pairs = []
    t = time.perf_counter()
    again = confirm()
    sess.tick("fresh_confirmation", t)
    second, sess.fresh_pairs = sess.fresh_pairs, first + sess.fresh_pairs
    first_look = FreshSetsInfo(**fresh_summary(first, "none"))
    if second and not slower_on_fresh(second, slack):
        sess.diagnostics.fresh_sets = FreshSetsInfo(**fresh_summary(second, "confirmation"), first_look=first_look)
        return _charged(sess, again, second, slack)
    sess.diagnostics.fresh_sets = FreshSetsInfo(**fresh_summary(first + second, "fresh"), first_look=first_look)
    sess.flags.append("fresh_inputs_slower")
    return [f for f, _ in first + second]


def _charged(sess: Session, samples: list[float], pairs: list[tuple[float, float]], slack: float) -> list[float]:
    """``samples`` scaled by :func:`~cuda_agent.harness.fresh_sets.fresh_charge` for a gap within the slack (a
    content cache faster on the sets it has seen by less than the slack is timed as on new data); the factor goes to
    ``diagnostics.fresh_sets.charge``."""
    factor = fresh_charge(pairs, slack)
    if factor <= 1.0:
        return samples
    if sess.diagnostics.fresh_sets is not None:
        sess.diagnostics.fresh_sets.charge = round(factor, 4)
    return [s * factor for s in samples]
