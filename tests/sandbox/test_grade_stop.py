"""The grading pass's precision-targeted stop (issue 21; timing preset ``standard_fast``): the rule itself on known
samples, the protocol's validation, and real grading passes on the CPU backend (the relu task's own Model graded by
the self-check, every per-call time kept, so each stop can be checked against the samples it rested on)."""

from __future__ import annotations

import pytest

from cuda_agent.harness.grade_stop import ALL_ROUNDS, speedup_interval, stop_check
from cuda_agent.harness.timing_protocol import TimingProtocol, resolve_protocol


def _rounds(values: list[float], calls: int = 12, jitter: float = 0.001) -> list[list[float]]:
    """One round per value: ``calls`` samples spread +-jitter around it."""
    return [[v * (1 + jitter * ((i % 5) - 2) / 2) for i in range(calls)] for v in values]


STABLE = {"cand": _rounds([2.0, 2.0, 2.0]), "eager": _rounds([3.0, 3.0, 3.0])}  # speedup 1.5, tight


def test_a_round_that_disagrees_widens_the_interval_to_its_own_speedup() -> None:
    # KernelBench level3/7_GoogleNet: its first round read 0.55, the next two 1.02, each round tight on its own
    iv = speedup_interval(_rounds([1.02, 1.02, 1.02]), _rounds([1.855, 1.0, 1.0]))
    assert iv.lo <= 0.55 + 1e-3 and iv.hi >= 1.02 - 1e-3 and iv.rel_half_width > 0.2


def test_the_rule_waits_for_min_rounds_then_stops_on_a_stable_case() -> None:
    kw = {"target_rel_ci": 0.01, "thresholds": [1.0, 1.05]}
    one = stop_check(STABLE["cand"][:1], {"eager": STABLE["eager"][:1]}, min_rounds=2, **kw)
    assert not one.stop and "1 of at least 2 rounds" in one.why
    two = stop_check(STABLE["cand"][:2], {"eager": STABLE["eager"][:2], "compile": []}, min_rounds=2, **kw)
    assert two.stop and two.why.startswith("eager 1.5"), two.why


def test_the_rule_never_stops_while_an_interval_holds_a_line() -> None:
    cand, eager = _rounds([1.0, 1.0, 1.0], jitter=0.004), _rounds([1.0, 1.0, 1.0], jitter=0.004)  # speedup ~1.0
    check = stop_check(cand, {"eager": eager}, min_rounds=2, target_rel_ci=0.05, thresholds=[1.0, 1.05])
    assert not check.stop and "holds the line 1" in check.why, check.why
    # the same samples stop once the line is not one of the thresholds; the compile baseline is held too
    assert stop_check(cand, {"eager": eager}, min_rounds=2, target_rel_ci=0.05, thresholds=[1.05]).stop
    held = stop_check(STABLE["cand"], {"eager": STABLE["eager"], "compile": eager}, min_rounds=2,
                      target_rel_ci=0.05, thresholds=[1.05, 0.5])
    assert not held.stop and held.why.startswith("compile") and "holds the line 0.5" in held.why


def test_the_rule_goes_on_while_an_interval_is_wider_than_the_target() -> None:
    cand = _rounds([2.0, 2.1, 1.9], jitter=0.05)
    check = stop_check(cand, {"eager": STABLE["eager"]}, min_rounds=2, target_rel_ci=0.01, thresholds=[])
    assert not check.stop and "wider than +-1.00%" in check.why


def test_protocol_validation_and_the_standard_fast_preset() -> None:
    with pytest.raises(ValueError, match="grade_min_rounds 4 is more than grade_rounds 3"):
        TimingProtocol(grade_target_rel_ci=0.01, grade_min_rounds=4, grade_rounds=3)
    with pytest.raises(ValueError, match="grade_min_rounds"):
        TimingProtocol(grade_min_rounds=1)  # one round cannot decide
    with pytest.raises(ValueError, match=r"grade_stop_thresholds \[0.0\] are not speedups"):
        TimingProtocol(grade_target_rel_ci=0.01, grade_stop_thresholds=[0.0, 1.05])
    assert not resolve_protocol("quick", "cuda").grade_stop()  # one round and the stop off is valid
    for kind in ("cuda", "cpu"):
        standard, fast = resolve_protocol("standard", kind), resolve_protocol("standard_fast", kind)
        assert not standard.grade_stop() and standard.grade_spread_rounds() == standard.grade_rounds == 3
        assert fast.grade_stop() and (fast.grade_min_rounds, fast.grade_rounds, fast.grade_calls()) == (3, 9, 11)
        assert fast.grade_spread_rounds() == 3 and fast.grade_stop_thresholds == [0.95, 1.05]
        # the minimum is one standard round's calls (over three batches), the maximum the standard pass's
        assert fast.grade_min_rounds * fast.grade_calls() == standard.grade_calls() == 33
        assert fast.grade_rounds * fast.grade_calls() == standard.grade_calls() * standard.grade_rounds == 99
        assert fast.timer == standard.timer and fast.target_rel_ci == standard.target_rel_ci


def test_standard_fast_is_a_user_setting() -> None:
    from cuda_agent.harness.settings import HarnessSettings

    assert HarnessSettings(timing={"preset": "standard_fast"}).timing.preset == "standard_fast"
    with pytest.raises(ValueError, match="standard_fast"):
        HarnessSettings(timing={"preset": "fast"})


def _split(result) -> tuple[dict[str, list[list[float]]], int]:  # type: ignore[no-untyped-def]
    """The graded samples by round (Diagnostics.grade_round_calls) and the fresh-set calls among the candidate's."""
    d = result.diagnostics
    raw = {"candidate": result.timing.raw_ms, "eager": result.baselines.eager.raw_ms}
    out = {}
    for k, xs in raw.items():
        sizes, i, out[k] = d.grade_round_calls[k], 0, []
        assert sum(sizes) == len(xs), (k, sizes, len(xs))
        for n in sizes:
            out[k].append(xs[i:i + n])
            i += n
    return out, len(raw["candidate"]) - len(raw["eager"])


def test_a_real_grade_stops_after_min_rounds_on_a_stable_case(make_evaluator, tasks) -> None:  # type: ignore[no-untyped-def]
    """A target no self-check misses and a line far away: the pass stops at grade_min_rounds (3 of at most 5),
    not before, with every fresh-set call and spot check a full pass makes."""
    protocol = {"grade_rounds": 5, "grade_min_rounds": 3, "grade_calls_per_round": 6, "grade_spot_checks": 6,
                "grade_target_rel_ci": 100.0, "grade_stop_thresholds": [1000.0]}
    with make_evaluator(protocol=protocol) as ev:
        r = ev.self_check(tasks.relu)
    assert r.status.value == "correct", r.summary_for_agent()
    d = r.diagnostics
    assert (d.grade_rounds, d.grade_rounds_run) == (5, 3), d.grade_stop_reason
    assert d.grade_stop_reason.startswith("precise: eager "), d.grade_stop_reason
    rounds, fresh = _split(r)
    assert [len(x) for x in rounds["eager"]] == [6, 6, 6]
    assert d.spot_checks == 6  # the cap, all of it in the rounds that ran
    assert fresh == ev.settings.integrity.fresh_set_calls > 0  # every fresh call made, in the rounds that ran
    assert r.baselines.eager.samples == 18 and r.timing.samples == 18 + fresh


def test_a_real_grade_never_stops_while_the_interval_holds_a_line(make_evaluator, tasks) -> None:  # type: ignore[no-untyped-def]
    """Lines 0.02% apart from 0.05 to 20: whatever a self-check's speedup reads on a busy host, its interval holds
    one, so every round runs, and the reason says which line held it."""
    lines = [0.05 * 1.0002 ** i for i in range(29960)]
    protocol = {"grade_rounds": 3, "grade_min_rounds": 2, "grade_calls_per_round": 6,
                "grade_target_rel_ci": 100.0, "grade_stop_thresholds": lines}
    with make_evaluator(protocol=protocol) as ev:
        r = ev.self_check(tasks.relu)
    assert r.status.value == "correct", r.summary_for_agent()
    d = r.diagnostics
    assert d.grade_rounds_run == 3 and d.grade_stop_reason.startswith("max_rounds: eager "), d.grade_stop_reason
    assert "holds the line" in d.grade_stop_reason
    rounds, _ = _split(r)
    iv = speedup_interval(rounds["eager"], rounds["candidate"])
    assert any(iv.holds(t) for t in lines) and iv.lo <= r.speedup_eager <= iv.hi


def test_a_real_grade_runs_every_round_when_never_precise_and_by_default(make_evaluator, cpu_evaluator, tasks) -> None:  # type: ignore[no-untyped-def]
    protocol = {"grade_rounds": 3, "grade_min_rounds": 2, "grade_calls_per_round": 5, "grade_target_rel_ci": 1e-9}
    with make_evaluator(protocol=protocol) as ev:
        r = ev.self_check(tasks.relu)
    assert r.status.value == "correct", r.summary_for_agent()
    assert r.diagnostics.grade_rounds_run == 3 and "wider than" in r.diagnostics.grade_stop_reason
    # the default protocol (the stop off): every round, as before
    assert not cpu_evaluator.protocol.grade_stop()
    d = cpu_evaluator.self_check(tasks.relu).diagnostics
    rounds = cpu_evaluator.protocol.grade_rounds
    assert (d.grade_rounds, d.grade_rounds_run, d.grade_stop_reason) == (rounds, rounds, ALL_ROUNDS)
    assert d.grade_round_calls["eager"] == [cpu_evaluator.protocol.grade_calls()] * rounds
