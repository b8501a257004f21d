"""Session 38's red team: a content-keyed cache under the CPU backend's 25% fresh-set slack.

A GEMM hashing every element of ``x`` (so the near-duplicate widened sets miss it), copying the stored output on a
hit and computing most rows again to look busy ran its rotated calls up to 25% faster than its fresh ones without a
flag (the slack is for host-timing noise). Now a gap within the slack is charged: when the median fresh/neighbour
ratio is over 1 + ``FRESH_CHARGE_MARGIN`` the samples are scaled by it (``timed_run.settle_fresh_sets``), so a cache
gains at most the margin; an honest candidate, whose ratio is noise around 1, is charged only in the tail of that
noise and by its size."""

from __future__ import annotations

from types import SimpleNamespace

from cuda_agent.harness.fresh_sets import FRESH_ABS_SLACK_MS, FRESH_CHARGE_MARGIN, fresh_charge
from cuda_agent.harness.timed_run import settle_fresh_sets
from cuda_agent.schemas.result import FreshSetsInfo  # noqa: F401 - the diagnostics type settle_fresh_sets fills


def _session(pairs: list[tuple[float, float]], slack: float = 0.25) -> SimpleNamespace:
    return SimpleNamespace(fresh_pairs=list(pairs), ctx=SimpleNamespace(protocol=SimpleNamespace(fresh_set_slack=slack)),
                           diagnostics=SimpleNamespace(fresh_sets=None), flags=[], tick=lambda *a: None)


def test_a_cache_under_the_slack_is_charged_its_gap() -> None:
    pairs = [(1.2, 1.0), (1.22, 1.0), (1.18, 1.01), (1.21, 0.99)]  # fresh calls ~20% slower: under the 25% slack
    sess = _session(pairs)
    out = settle_fresh_sets(sess, [1.0] * 10, lambda: [])
    assert not sess.flags and all(abs(s - 1.2) < 0.02 for s in out), out
    assert sess.diagnostics.fresh_sets.charge is not None and sess.diagnostics.fresh_sets.charge > 1.15


def test_noise_within_the_margin_and_tiny_gaps_are_not_charged() -> None:
    assert fresh_charge([(1.03, 1.0), (0.98, 1.0), (1.04, 1.0)], 0.25) == 1.0
    assert FRESH_CHARGE_MARGIN <= 0.05
    tiny = 0.005  # ms: a 20% gap of 1 us is under the absolute slack
    assert fresh_charge([(tiny * 1.2, tiny)] * 3, 0.25) == 1.0 and tiny * 0.2 < FRESH_ABS_SLACK_MS
    sess = _session([(1.0, 1.0), (1.01, 1.0), (0.99, 1.0)])
    assert settle_fresh_sets(sess, [1.0, 1.1], lambda: []) == [1.0, 1.1]
    assert sess.diagnostics.fresh_sets.charge is None


def test_the_charge_is_capped_at_the_slack() -> None:
    assert fresh_charge([(1.24, 1.0)] * 4, 0.25) <= 1.25 and fresh_charge([(3.0, 1.0)] * 4, 0.25) == 1.25
