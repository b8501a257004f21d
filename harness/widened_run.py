"""The widened sets of a grading pass (T18): each kind of :data:`~cuda_agent.harness.widening.SCHEDULE` in turn.

A strategy over a :class:`~cuda_agent.harness.session.Session` using its public methods: each set is made by the
reference process from a secret seed (a ``dup`` set from the seed of a verify set the candidate was just called on
again), checked once and released. A set the reference gives up (not finite, or too sensitive to grade on, at every
widening it tries) is inconclusive, never a failure. What was tried goes to ``diagnostics.widened``.

Every kind but ``dup`` that gave a conclusive set is made again from a new secret seed during the timed rounds
(:func:`make_recalls`; how many a round: :func:`round_recalls`) and called, checked, at a secret position among a
round's timed calls (:func:`call_again`; its time is dropped). Session 41's red team counted calls in C++ (a static integer) and computed honestly only for
the first 14, which covered every verification and widened set, then ran ReLU as the identity and softmax without its
max shift (right on ``torch.rand`` inputs, so on every timed call and spot check): both graded correct. The sets are
new ones because the same sets called again were recognised: a kernel that kept a sample of every input of its first
calls stayed honest on those alone (reward 1 again).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cuda_agent.harness.fresh_sets import BIG_FRESH_BYTES

from cuda_agent.harness.widening import DUP_FRACTIONS, can_widen, schedule, widen_plans
from cuda_agent.schemas.task import TaskManifest

if TYPE_CHECKING:
    from cuda_agent.harness.session import Session


def gate_tolerance(sess: Session, task: TaskManifest) -> list[float]:
    """(atol, rtol) the sensitivity gate uses: those of the first output's dtype (the table's default otherwise)."""
    table = sess.ctx.tolerance_table(task)
    first = sess.sets[sess.sets.indices()[0]].outputs if len(sess.sets) else []
    dtype = first[0].dtype if first and first[0].dtype else "*"
    atol, rtol = table.get(dtype) or table.get("*") or (1e-2, 1e-2)
    return [float(atol), float(rtol)]


@dataclass
class Recall:
    """A widened set for one call among the timed calls: its kind, and its index and the line naming its widening
    once made (a big working set's recall is made at its position, so that it never sits beside the batch's sets)."""

    kind: str
    make: Callable[[], tuple[int | None, str]]
    k: int | None = None
    label: str = ""


#: Working sets above this many bytes get one recall a round (made at its position), the others every kind a round.
BIG_RECALL_BYTES = BIG_FRESH_BYTES
#: Each kind is recalled once per this many timed calls of the candidate (the standard pass's round): rounds of 11
#: calls (``standard_fast``, 3 to 9 rounds) recall each kind every third round, not nine times over.
RECALL_EVERY_CALLS = 33


def recall_order(kinds: list[str]) -> list[str]:
    """The grade's order of recall kinds: ``spike`` first (the one kind a sampling kernel cannot see coming), then
    the others in a secret shuffle."""
    rest = [k for k in kinds if k != "spike"]
    secrets.SystemRandom().shuffle(rest)
    return (["spike"] if "spike" in kinds else []) + rest


def round_recalls(order: list[str], r: int, input_bytes: int, calls_per_round: int = RECALL_EVERY_CALLS,
                  sure_rounds: int = 1) -> tuple[list[str], bool]:
    """The kinds recalled in round ``r`` and whether they are made at their position (lazily).

    ``spike`` (when conclusive) is in every round, since a kernel that samples its input, honest wherever the sample
    looks widened, misses only the spikes. The other kinds: for a small working set each once per
    :data:`RECALL_EVERY_CALLS` calls (every round of 33 calls; with shorter rounds, dealt over as many rounds as make
    up 33 calls, but never over more than the ``sure_rounds`` sure to run, so each kind is called at least once);
    for a big one (extra sets of a 16 GiB task held through a batch would pass the device's budget) one
    set a round, made at its position: ``spike`` in even rounds, the others in turn in odd ones."""
    spike = [k for k in order if k == "spike"]
    rest = [k for k in order if k != "spike"]
    if not order:
        return [], False
    if input_bytes > BIG_RECALL_BYTES:
        if spike and (r % 2 == 0 or not rest):
            return spike, True
        return [rest[(r // 2 if spike else r) % len(rest)]], True
    stride = max(1, min(RECALL_EVERY_CALLS // max(1, calls_per_round), sure_rounds))
    return spike + [kind for i, kind in enumerate(rest) if i % stride == r % stride], False


def _at(made: object) -> str:
    """How far the reference backed a set's widening off, for its lines ('' at the full widening)."""
    shrink = getattr(made, "widen_shrink", None)
    return "" if shrink in (None, 1.0) else f" at {shrink:g} of the widening"


def _checked_call(sess: Session, k: int, where: str, after: str = "") -> None:
    """One checked call on widened set ``k``; its mismatches name the widening (``where``)."""
    errors_before = len(sess.errors)
    sess.call(k, check=True)
    for e in sess.errors[errors_before:]:
        e.message = f"on inputs widened within their domain ({where}){after}: {e.message}"


def make_recalls(sess: Session, task: TaskManifest, kinds: list[str], *, lazy: bool = False) -> list[Recall]:
    """A new widened set of each of ``kinds`` from a new secret seed (its spikes placed anew), made by the reference
    before a timed batch, or (``lazy``) just before its call; a kind inconclusive this time is left out of the batch
    (never a failure)."""
    gate = gate_tolerance(sess, task)

    def maker(kind: str) -> Callable[[], tuple[int | None, str]]:
        def make() -> tuple[int | None, str]:
            plans, lines = widen_plans(task, kind=kind, seed=secrets.randbits(31))
            k, made = sess.sets.make_widened(secrets.randbits(31), plans, gate)
            return k, f"{kind}{_at(made)}: {'; '.join(lines)}"
        return make

    out = [Recall(kind, maker(kind)) for kind in kinds]
    if lazy:
        return out
    t = time.perf_counter()
    for recall in out:
        recall.k, recall.label = recall.make()
    sess.tick("widened_sets", t)
    return [r for r in out if r.k is not None]


def call_again(sess: Session, recall: Recall) -> None:
    """One checked call on a new widened set among the timed calls (its time is not a sample); mismatches name it.
    A lazy recall is made first; inconclusive then, it is skipped."""
    if recall.k is None:
        t = time.perf_counter()
        recall.k, recall.label = recall.make()
        sess.tick("widened_sets", t)
        if recall.k is None:
            return
    _checked_call(sess, recall.k, recall.label, ", a new set among the timed calls")
    info = sess.diagnostics.widened
    if info is not None:  # one line counting them, after the sets' own
        head = "new sets among the timed calls: "
        done = next((i for i, o in enumerate(info.outcomes) if o.startswith(head)), None)
        n = 1 + (int(info.outcomes[done][len(head):].split()[0]) if done is not None else 0)
        line = f"{head}{n} checked (at secret positions of every round)"
        if done is None:
            info.outcomes.append(line)
        else:
            info.outcomes[done] = line
    sess.release(recall.k)


def verify_widened(sess: Session, task: TaskManifest, count: int) -> list[str]:
    """Check ``count`` widened sets, kinds in schedule order; stop at the first failure. Returns the kinds but ``dup``
    that gave a conclusive set, to be made anew for every grading round (:func:`make_recalls`)."""
    from cuda_agent.schemas.result import WidenedInfo

    first_plans, first_lines = widen_plans(task)
    info = sess.diagnostics.widened = WidenedInfo(plan=list(first_lines))
    recalls: list[str] = []
    if not can_widen(first_plans):
        return recalls
    t = time.perf_counter()
    gate = gate_tolerance(sess, task)
    verify = sess.sets.indices("verify")
    dups = 0
    for kind in schedule(count):
        seed = secrets.randbits(31)
        origin = None
        if kind == "dup":
            if not verify:
                continue
            origin = verify[secrets.randbelow(len(verify))]
            plans, lines = widen_plans(task, kind="dup", seed=seed, fraction=DUP_FRACTIONS[dups % len(DUP_FRACTIONS)])
            seed, dups = sess.sets[origin].seed, dups + 1
        else:  # the seed also places a spike set's spikes
            plans, lines = widen_plans(task, kind=kind, seed=secrets.randbits(31))
        if not can_widen(plans):
            info.outcomes.append(f"{kind}: no input can take it")
            continue
        k, made = sess.sets.make_widened(seed, plans, None if kind == "dup" else gate)
        info.kinds.append(kind)
        if k is None:
            info.inconclusive += 1
            why = made.gate_notes[-1] if made.gate_notes else "reference output not finite"
            info.outcomes.append(f"{kind}: inconclusive at every widening ({why})")
            continue
        if origin is not None:  # the set it derives from, called just before it (a one-slot cache holds it now)
            sess.call(origin, check=True)
            if sess.failed:
                break
        _checked_call(sess, k, f"{kind}{_at(made)}: {'; '.join(lines)}")
        info.checked += 1
        info.outcomes.append(f"{kind}{_at(made)}: checked" + (f" (gate backed off: {made.gate_notes[0]})"
                                                              if made.gate_notes else ""))
        if origin is None and kind not in recalls:
            recalls.append(kind)
        sess.release(k)
        if sess.failed:
            break
    sess.tick("widened_sets", t)
    return recalls
