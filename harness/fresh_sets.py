"""Timed calls on input sets the candidate has never seen: the defence against a result cache keyed by content.

The timed calls of a batch rotate over a handful of input sets (the verify sets plus the timing protocol's ``rotation_sets``), and
the staging buffers give every call the same addresses with different data, so a cache keyed by ``data_ptr`` is
stale on the next set (T12). A cache keyed by the data itself is not: a kernel that hashes a few sampled elements
of its inputs, looks the hash up in ``__device__`` memory and copies the stored output on a hit is right on every
rotated set after its first round, and its spot checks pass. What it cannot be is fast on data it has not seen.

So each profile's timing, and each grading pass (spread over its rounds), also calls the candidate on
``fresh_set_calls`` sets made for that call alone, at secret positions among its calls, each spot-checked. A fresh
set reaches the candidate's process just before its call (made by the reference beforehand, staged and handed over
inside the batch, through reusable slot files where files are used): were it sent earlier, a candidate could find it
in its process during a rotated call and compute its output ahead. Each fresh call is compared with the rotated
calls just before it (not after: once a fresh call has shown the candidate new data, it could slow its next calls
to hide the gap), so a drift over the batch opens no gap. When the fresh calls of a profile, or of all grading
rounds together, run slower than those neighbours by more than ``fresh_set_slack``, the gap is looked at again in
one more batch of the same form (a profile's timing batch; a grading round with all the pass's fresh calls). Slower
there too: the candidate's time is the fresh calls' median of both looks (flag ``fresh_inputs_slower``). Not
slower: the confirming batch's samples are its time.

An honest candidate's time does not depend on whether it saw the data before; its fresh calls are timed under the
same conditions as the others (each is timed before it is checked), so a gap is noise, and with a handful of fresh
calls on a host-timed CPU kernel it was not rare (4 of 30 profiles of an honest relu at 5% slack): the second look
makes a false flag need two such draws in a row. A cache cannot use the second look: it misses on every fresh set
there too, so it passes only by running its rotated calls as slowly, and the confirming batch is all it is timed
on (a cache fast for the first look and slow for the second gets its miss time). Which batch confirms is plain to
the candidate (it can count calls); that is allowed for, as only the confirming batch's samples count.
"""

from __future__ import annotations

import secrets
import statistics
from typing import Any

#: Added to the relative slack: a gap under this (ms) is never taken as a cache (timer resolution, tiny kernels).
FRESH_ABS_SLACK_MS = 0.002
#: Working sets above this many bytes get one fresh set per batch (each is kept in device memory till the end).
BIG_FRESH_BYTES = 256 * 2**20


def fresh_count(calls: int, input_bytes: int) -> int:
    """Fresh-set calls of one evaluation (a profile's timing; a grading pass, spread over its rounds): ``calls``
    (``integrity.fresh_set_calls``), at most one for a big working set."""
    return min(calls, 1) if input_bytes > BIG_FRESH_BYTES else calls


def fresh_positions(n_calls: int, count: int, start: int = 0) -> list[int]:
    """``count`` distinct call positions in ``range(start, n_calls)`` (``range(n_calls)`` where that is too short;
    all of them if fewer) drawn with ``secrets``, sorted."""
    lo = start if n_calls - start >= count else 0
    count = min(count, n_calls - lo)
    return sorted(secrets.SystemRandom().sample(range(lo, n_calls), count)) if count > 0 else []


#: Rotated calls just before a fresh call that its time is compared with.
NEIGHBOURS = 2


def fresh_pairs(sequence: list[tuple[bool, float]]) -> list[tuple[float, float]]:
    """(fresh ms, median ms of the up to :data:`NEIGHBOURS` rotated calls just before it) for every fresh call of
    one batch's ``sequence`` of (is_fresh, ms) in call order; a fresh call with no rotated call before it is left
    out."""
    out = []
    for i, (is_fresh, ms) in enumerate(sequence):
        if not is_fresh:
            continue
        before = [m for f, m in reversed(sequence[:i]) if not f][:NEIGHBOURS]
        if before:
            out.append((ms, statistics.median(before)))
    return out


def slower_on_fresh(pairs: list[tuple[float, float]], slack: float) -> bool:
    """Whether fresh calls run slower than their rotated neighbours: the median of their ratios over ``1 + slack``
    and the median fresh time over the median neighbour time by more than :data:`FRESH_ABS_SLACK_MS`."""
    if not pairs:
        return False
    ratio = statistics.median(f / n if n > 0 else float("inf") for f, n in pairs)
    gap = statistics.median(f for f, _ in pairs) - statistics.median(n for _, n in pairs)
    return ratio > 1.0 + slack and gap > FRESH_ABS_SLACK_MS


#: A fresh-set gap under the slack still costs its size: the candidate's samples are scaled by the median
#: fresh/neighbour ratio when that is over ``1 +`` this (the slack alone let a content cache run its rotated calls up
#: to 25% faster than its fresh ones on the CPU backend, unflagged: session 38's red team, a GEMM cache 19% faster
#: on seen sets).
FRESH_CHARGE_MARGIN = 0.05


def fresh_charge(pairs: list[tuple[float, float]], slack: float) -> float:
    """The factor a candidate's samples are scaled by for a fresh-set gap within ``slack`` (1.0: none): the median of
    the fresh/neighbour ratios when it is over ``1 +`` :data:`FRESH_CHARGE_MARGIN` (no more than ``1 + slack``) and
    the fresh median is over the neighbours' by more than :data:`FRESH_ABS_SLACK_MS`. An honest candidate's ratio
    is noise around 1, so it is charged only in the tail of that noise, by its size."""
    if not pairs:
        return 1.0
    ratio = statistics.median(f / n if n > 0 else float("inf") for f, n in pairs)
    gap = statistics.median(f for f, _ in pairs) - statistics.median(n for _, n in pairs)
    if ratio <= 1.0 + FRESH_CHARGE_MARGIN or gap <= FRESH_ABS_SLACK_MS:
        return 1.0
    return min(ratio, 1.0 + slack)


def fresh_summary(pairs: list[tuple[float, float]], reported: str | None = None) -> dict[str, Any]:
    """What the result's ``diagnostics.fresh_sets`` records: the fresh calls, their median and their neighbours', and
    (``reported``) which samples the time came from: 'all', 'confirmation' (a gap the confirming batch did not
    show: its samples) or 'fresh' (the fresh calls of both looks)."""
    out: dict[str, Any] = {"calls": len(pairs), "median_ms": statistics.median(f for f, _ in pairs) if pairs else None,
                           "neighbours_median_ms": statistics.median(n for _, n in pairs) if pairs else None}
    if reported is not None:
        out["reported"] = reported
    return out
