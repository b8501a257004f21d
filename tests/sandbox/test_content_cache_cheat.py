"""A kernel that caches its outputs by the inputs' content (T12): right on every rotated timing set, fast only on
data it has seen. Built as a real extension (the static source rules are bypassed, as a kernel keeping the cache
in ``__device__`` memory, which they allow, would bypass them); only the runtime layer stands in its way: calls on
never-seen input sets (``fresh_set_calls``, harness/fresh_sets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.fresh_sets import FRESH_ABS_SLACK_MS, fresh_pairs, fresh_positions, slower_on_fresh

from tests.sandbox.conftest import CACHING_RELU_BINDING, caching_relu_kernel

pytestmark = pytest.mark.slow

#: Misses pay MISS_MS (a costly computation stands behind it), hits copy the stored output.
MISS_MS = 3
CACHING_KERNEL = caching_relu_kernel(MISS_MS)

BINDING = CACHING_RELU_BINDING


@pytest.fixture(scope="module")
def caching_kit(kit_builder) -> Path:  # type: ignore[no-untyped-def]
    return kit_builder("caching-kit", {"caching.cpp": CACHING_KERNEL, "caching_binding.cpp": BINDING}, "cpu")


def _evaluator(make_evaluator, fresh_set_calls: int = 4, **protocol):  # type: ignore[no-untyped-def]
    """A CPU evaluator (the 'standard' preset's fresh_set_slack: host-timed calls are noisier) with 12-24 timed
    calls per profile and 12 per grading round."""
    return make_evaluator(integrity={"fresh_set_calls": fresh_set_calls},
                          protocol={"min_calls": 12, "max_calls": 24, "grade_calls_per_round": 12, **protocol})


def test_a_content_keyed_cache_is_timed_on_data_it_has_not_seen(make_evaluator, make_ws, caching_kit, tasks,
                                                               honest_relu) -> None:
    with _evaluator(make_evaluator, fresh_set_calls=0) as ev:
        fooled = ev.profile(tasks.relu, make_ws(honest_relu), caching_kit)
    # Without fresh sets the cheat is right on every call and its time is the copy's: the hole being closed.
    assert fooled.status.value == "correct", fooled.summary_for_agent()
    assert fooled.timing.median_ms < MISS_MS / 3, fooled.timing

    with _evaluator(make_evaluator) as ev:
        profiled = ev.profile(tasks.relu, make_ws(honest_relu), caching_kit)
        graded = ev.grade(tasks.relu, make_ws(honest_relu), caching_kit)
    for result in (profiled, graded):
        assert result.status.value == "correct", result.summary_for_agent()  # its outputs are right
        assert "fresh_inputs_slower" in result.flags
        assert result.timing.median_ms >= MISS_MS * 0.9, result.timing  # the time of a miss, not of a copy
        fresh = result.diagnostics.fresh_sets.model_dump()
        assert fresh["reported"] == "fresh", fresh
        assert fresh["neighbours_median_ms"] < MISS_MS / 3 <= fresh["median_ms"], fresh
        assert result.timing.samples == fresh["calls"]  # the time is the fresh calls' alone, of both looks
        assert fresh["first_look"]["calls"] == 4, fresh  # the gap was looked at twice
    assert profiled.diagnostics.fresh_sets.model_dump()["calls"] == 4 + 4  # a second timing batch confirmed it
    assert graded.diagnostics.fresh_sets.model_dump()["calls"] == 4 + 4  # four over the two rounds, four in one more round


@pytest.fixture(scope="module")
def first_look_only_kit(kit_builder) -> Path:  # type: ignore[no-untyped-def]
    """The content cache, given up once it has stored nine outputs: the five rotated sets and the first look's
    four fresh ones. It is fast until the gap is found and plays fair in the confirming batch."""
    kernel = CACHING_KERNEL.replace("  for (int i = 0; i < used; ++i)", "  for (int i = 0; i < used && used < 9; ++i)")
    assert kernel != CACHING_KERNEL
    return kit_builder("first-look-only-kit", {"caching.cpp": kernel, "caching_binding.cpp": BINDING}, "cpu")


def test_a_cache_that_plays_fair_in_the_confirming_batch_is_timed_at_its_misses(
        make_evaluator, make_ws, first_look_only_kit, tasks, honest_relu) -> None:
    with _evaluator(make_evaluator) as ev:
        profiled = ev.profile(tasks.relu, make_ws(honest_relu), first_look_only_kit)
        graded = ev.grade(tasks.relu, make_ws(honest_relu), first_look_only_kit)
    for result in (profiled, graded):
        assert result.status.value == "correct", result.summary_for_agent()
        fresh = result.diagnostics.fresh_sets.model_dump()
        first = fresh["first_look"]  # (recorded when the first look found a gap)
        assert first["neighbours_median_ms"] * 1.25 < first["median_ms"], fresh
        # Idle, the second look shows no gap ('confirmation': its samples, all misses). On a loaded 2-core machine the
        # fresh calls of the second look can still come out slower (first touches of a just-handed-over set cost more
        # there: a loaded fresh-clone CI run saw 5.1 ms against 3.1 ms), and the fresh calls of both looks are the
        # time ('fresh'). Either way the outcome under test holds: the cache's hits are not what is timed.
        assert fresh["reported"] in ("confirmation", "fresh"), fresh
        assert ("fresh_inputs_slower" in result.flags) == (fresh["reported"] == "fresh")
        assert result.timing.median_ms >= MISS_MS * 0.9, result.timing  # only its (slow) calls count


def test_an_honest_kernel_keeps_its_median_and_its_fresh_calls_are_checked(make_evaluator, make_ws, kit, tasks,
                                                                          honest_relu) -> None:
    with _evaluator(make_evaluator, spot_check_every=1000, spot_check_max=1) as ev:
        assert ev.protocol.fresh_set_slack == 0.25
        profiled = ev.profile(tasks.relu, make_ws(honest_relu), kit)
    assert profiled.status.value == "correct", profiled.summary_for_agent()
    fresh = profiled.diagnostics.fresh_sets.model_dump()
    # 'confirmation': noise opened a gap in the first look and the second look showed none (its samples count).
    assert fresh["calls"] == 4 and fresh["reported"] in ("all", "confirmation"), fresh
    assert "fresh_inputs_slower" not in profiled.flags
    assert profiled.timing.samples >= 12 + 4  # the rotated calls and the fresh ones
    assert profiled.diagnostics.spot_checks <= 1  # the fresh calls are checked besides the capped spot checks


def test_a_fresh_set_reaches_the_candidate_just_before_its_call(make_evaluator, make_ws, kit, tasks, honest_relu,
                                                              monkeypatch) -> None:
    from cuda_agent.harness.sandbox import CandidateProcess

    ops: list[tuple[str, int | None]] = []
    real_request = CandidateProcess.request

    def recording(self, timeout_s, req):  # type: ignore[no-untyped-def]
        ops.append((req.op, getattr(req, "set", None)))
        return real_request(self, timeout_s, req)

    monkeypatch.setattr(CandidateProcess, "request", recording)
    with _evaluator(make_evaluator) as ev:
        graded = ev.grade(tasks.relu, make_ws(honest_relu), kit)
    assert graded.status.value == "correct", graded.summary_for_agent()
    sent_at = {k: i for i, (op, k) in enumerate(ops) if op == "inputs"}
    fresh = sorted(k for k in sent_at if ops[sent_at[k] + 1] == ("call", k))
    looks = 2 if graded.diagnostics.fresh_sets.model_dump()["reported"] == "confirmation" else 1  # (noise: a second look)
    assert len(fresh) == 4 * looks  # four over the grading pass's rounds (and four in a confirming round)
    for k in fresh:  # handed over right before its first call, and called on once
        assert [i for i, (op, j) in enumerate(ops) if op == "call" and j == k] == [sent_at[k] + 1]
        assert [op for op, j in ops if j == k].count("inputs") == 1


def test_a_kernel_wrong_on_new_data_only_fails_on_a_fresh_call(make_evaluator, make_ws, lazy_new_data_kit, tasks,
                                                               honest_relu) -> None:
    # Spot checks of the rotated calls all but off: the fresh calls are what is checked.
    quiet = dict(spot_check_every=1000, spot_check_max=1)
    with _evaluator(make_evaluator, fresh_set_calls=0, **quiet) as ev:
        fooled = ev.profile(tasks.relu, make_ws(honest_relu), lazy_new_data_kit)
    assert fooled.status.value == "correct", fooled.summary_for_agent()  # the control: nothing else catches it
    with _evaluator(make_evaluator, **quiet) as ev:
        profiled = ev.profile(tasks.relu, make_ws(honest_relu), lazy_new_data_kit)
    assert profiled.status.value == "incorrect", profiled.summary_for_agent()


@pytest.fixture(scope="module")
def lazy_new_data_kit(kit_builder) -> Path:  # type: ignore[no-untyped-def]
    """Right on the first five sets it sees (the three verify and two rotation sets), zeros on any later one."""
    kernel = CACHING_KERNEL.replace(
        "  auto t0 = std::chrono::steady_clock::now();",
        "  if (used >= 5) { std::memset(y, 0, n * 4); return; }\n  auto t0 = std::chrono::steady_clock::now();")
    return kit_builder("lazy-new-data-kit", {"caching.cpp": kernel, "caching_binding.cpp": BINDING}, "cpu")


def test_fresh_calls_are_compared_with_the_calls_just_before_them() -> None:
    # A drift over the batch (0.06 ms falling to 0.03) opens no gap: each fresh call is compared with its neighbours.
    drifting = [(False, 0.06), (False, 0.06), (True, 0.06), (False, 0.04), (False, 0.04), (True, 0.04), (False, 0.03),
                (True, 0.03), (False, 0.03)]
    assert fresh_pairs(drifting) == [(0.06, 0.06), (0.04, 0.04), (0.03, 0.035)]
    assert not slower_on_fresh(fresh_pairs(drifting), 0.05)
    # Only the calls before count: a candidate that saw new data cannot hide the gap by slowing its next calls.
    assert fresh_pairs([(False, 1.0), (False, 2.0), (False, 3.0), (True, 5.0), (False, 50.0)]) == [(5.0, 2.5)]
    assert fresh_pairs([(True, 1.0), (False, 1.0)]) == []  # nothing before it: nothing to compare
    assert not slower_on_fresh([(1.04, 1.0)] * 4, 0.05)
    assert slower_on_fresh([(1.06, 1.0)] * 4, 0.05)
    assert not slower_on_fresh([(0.001 + FRESH_ABS_SLACK_MS * 0.9, 0.001)] * 4, 0.05)  # under the timer's floor
    assert not slower_on_fresh([], 0.05)
    got = fresh_positions(10, 4, start=2)
    assert len(set(got)) == 4 and all(2 <= j < 10 for j in got) and got == sorted(got)
    assert fresh_positions(3, 5) == [0, 1, 2] and fresh_positions(5, 0) == []
    short = fresh_positions(4, 3, start=2)  # too few positions after start: drawn from 0
    assert len(short) == 3 and min(short) < 2
