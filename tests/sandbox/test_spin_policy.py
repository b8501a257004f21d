"""The spin rule for calls whose host waits for the device (harness/spin_policy.py), driven through the timer's own
loop (:func:`timed_takes`, what ``DeviceTimer.time_call`` runs on CUDA) with hosts shaped like the recorded rows of
gpu-state/kb_check/rows.jsonl: each take's enqueue is what that row's host did behind that spin.

- Blocked (the level-3 LSTMs and GRU: ``h0.to(device)`` in every forward waits for the spin): the enqueue is the spin
  plus the model's own host path. Session 38's H200 rows: 36_LSTMHn's eager calls 104 of 104 over the spin with
  enqueues up to 142.6 ms under the 120 ms cap (22.6 ms of LSTM), 37_LSTMCn 145.7 ms (25.7), 38_LSTMBidirectional
  185.9 ms (65.9); the H100 rows under the 5 ms cap: 35_LSTM 38.5 ms (33.5), 39_GRU 58.7 ms (53.7).
- Not blocked, host-bound: 34_VanillaRNNHidden's eager enqueue of 124 ms (H200, session 38) whatever the spin, in
  the band at 1.036 once the spin covered it; a compiled conv2d_relu's 0.64-4.5 ms against the 200 us spin.
"""

from __future__ import annotations

import random

import pytest

from cuda_agent.harness.messages import TimerSpec
from cuda_agent.harness.spin_policy import CONFIRMATIONS, SpinPolicy, adaptive_spin_us, next_spin_us, timed_takes

BASE_US = 200.0
MAX_US = TimerSpec().preroll_max_us  # 500 ms


def blocked_host(own_ms: float, jitter: float = 0.03, seed: int = 0):  # type: ignore[no-untyped-def]
    """A host that waits for the spin, then enqueues ``own_ms`` of its own (+-``jitter``)."""
    rng = random.Random(seed)
    return lambda spin_us: spin_us / 1e3 + own_ms * (1 + rng.uniform(-jitter, jitter))


def free_host(own_ms: float, jitter: float = 0.03, seed: int = 0):  # type: ignore[no-untyped-def]
    """A host that never waits: its enqueue is its own, whatever the spin."""
    rng = random.Random(seed)
    return lambda spin_us: own_ms * (1 + rng.uniform(-jitter, jitter))


def run_calls(host, calls: int, *, retakes: int, window: int = 4, policy: SpinPolicy | None = None):  # type: ignore[no-untyped-def]
    """``calls`` timed calls through the timer's loop; returns the TakenCall of each and the policy."""
    from collections import deque

    policy = SpinPolicy() if policy is None else policy
    recent: deque[float] = deque(maxlen=window)
    out = []
    for _ in range(calls):
        done = timed_takes(lambda s: (None, host(s)), policy, base_us=BASE_US, recent_enqueue_ms=recent,
                           max_us=MAX_US, window=window, retakes=retakes)
        recent.append(done.enqueue_ms)
        out.append(done)
    return out, policy


@pytest.mark.parametrize("own_ms", [22.6, 25.7, 33.5, 53.7, 65.9])
@pytest.mark.parametrize("side,retakes", [("candidate", 0), ("baseline", 2)])
def test_a_call_whose_enqueue_grows_with_its_spin_is_timed_behind_the_base_spin_on_both_sides(
        own_ms: float, side: str, retakes: int) -> None:
    taken, policy = run_calls(blocked_host(own_ms), 104, retakes=retakes)
    assert policy.blocked
    first_blocked = next(j for j, t in enumerate(taken) if t.blocked)
    # The candidate learns it in three calls (three over-spin takes), a baseline inside its first call's retakes.
    assert first_blocked <= (CONFIRMATIONS + 1 if retakes == 0 else 1)
    later = taken[first_blocked:]
    assert all(t.spin_us == BASE_US and t.retakes == 0 and t.blocked for t in later)
    # The device no longer spins up to the cap: every later enqueue is the base spin plus the model's own host path.
    assert max(t.enqueue_ms for t in later) < own_ms * 1.05 + BASE_US / 1e3
    assert len(policy.evidence) == CONFIRMATIONS + 1


@pytest.mark.parametrize("own_ms", [22.6, 65.9])
def test_without_the_rule_the_spin_climbs_to_the_cap_and_every_call_stays_over_it(own_ms: float) -> None:
    """The rows' state before the rule: the adaptive spin and the retakes alone (both sides over the spin in every
    call, enqueues of cap + the model's host path). A failing check here means the rule's premise is gone."""
    host = blocked_host(own_ms)
    recent: list[float] = []
    spin_over, last_enqueue = [], 0.0
    for _ in range(30):
        spin = adaptive_spin_us(BASE_US, recent[-4:], MAX_US)
        for take in range(3):  # the first take and at most two retakes, as the timer's loop before the rule
            last_enqueue = host(spin)
            if take == 2 or last_enqueue * 1e3 <= spin or spin >= MAX_US:
                break
            spin = next_spin_us(spin, last_enqueue, MAX_US)
        recent.append(last_enqueue)
        spin_over.append(last_enqueue * 1e3 > spin)
    assert all(spin_over)
    assert last_enqueue == pytest.approx(MAX_US / 1e3 + own_ms, rel=0.01)


@pytest.mark.parametrize("own_ms,retakes", [(124.0, 0), (124.0, 2), (0.64, 2), (4.5, 2), (4.5, 0), (1.8, 0)])
def test_a_host_bound_call_that_never_waits_is_never_blocked_and_its_spin_covers_it(own_ms: float,
                                                                                      retakes: int) -> None:
    taken, policy = run_calls(free_host(own_ms, jitter=0.1), 200, retakes=retakes)
    assert not policy.blocked and not any(t.blocked for t in taken)
    assert all(t.enqueue_ms * 1e3 <= t.spin_us for t in taken[2:])  # covered from the second call on


@pytest.mark.parametrize("seed", range(20))
def test_a_noisy_host_is_not_taken_for_a_blocked_one(seed: int) -> None:
    """Enqueues that jump by up to 2.2x from call to call (a loaded host, the process descheduled now and then)."""
    rng = random.Random(seed)
    host = lambda spin_us: 3.0 * (1.0 if rng.random() < 0.7 else rng.uniform(1.3, 2.2))  # noqa: E731
    _, candidate = run_calls(host, 300, retakes=0)
    _, baseline = run_calls(host, 300, retakes=2)
    assert not candidate.blocked and not baseline.blocked


def test_one_jump_confirms_once_and_a_covered_take_starts_over() -> None:
    policy = SpinPolicy()
    assert not policy.observe(200.0, 10.0)  # over the spin: the first point
    assert not policy.observe(15_000.0, 25.0)  # grew with the spin: one confirmation
    assert not policy.observe(30_000.0, 26.0)  # did not grow: back to none
    assert not policy.observe(60_000.0, 56.0)
    assert not policy.observe(100_000.0, 20.0)  # covered: start over
    assert not policy.observe(200.0, 10.0) and not policy.observe(15_000.0, 25.0)
    assert policy.observe(40_000.0, 50.0)  # two steps in a row
    assert policy.first_spin_us(200.0, [50.0], MAX_US, 4) == 200.0
    assert policy.retake_spin_us(200.0, 50.0, MAX_US) is None
    policy.reset()
    assert not policy.blocked and policy.first_spin_us(200.0, [50.0], MAX_US, 4) == pytest.approx(75_000.0)


def test_spin_changes_within_jitter_tell_nothing() -> None:
    policy = SpinPolicy()
    for _ in range(10):  # the same spin, enqueues moving: no slope to measure
        policy.observe(1000.0, 2.0)
        policy.observe(1100.0, 3.0)
    assert not policy.blocked


def test_without_a_spin_there_is_one_take_and_nothing_is_learnt() -> None:
    policy = SpinPolicy()
    seen = []
    done = timed_takes(lambda s: (seen.append(s), 50.0), policy, base_us=0.0, recent_enqueue_ms=[40.0],
                       max_us=MAX_US, window=4, retakes=2)
    assert seen == [0.0] and done.retakes == 0 and not done.blocked and policy.evidence == []



def test_a_baseline_timed_before_the_rule_is_never_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_agent.harness import baselines

    args = ("hash", "NVIDIA H200", "2.13", "eager", "ours", "default", 1)
    with_spin, without = baselines.baseline_key(*args, 200.0), baselines.baseline_key(*args)
    monkeypatch.setattr(baselines, "SPIN_RULE_VERSION", 0)  # what a key made before the rule stands for
    assert baselines.baseline_key(*args, 200.0) != with_spin
    assert baselines.baseline_key(*args) == without  # no spin, nothing to block: CPU keys are unchanged


def test_a_check_row_keeps_both_sides_spin_blocked_counts() -> None:
    """``tasks check`` rows carry what each side's timer did with a blocked model (Diagnostics, interfaces 3.7)."""
    from cuda_agent.harness.suite_check import row_from_result
    from cuda_agent.schemas.result import CandidateResult, Diagnostics, Status
    from cuda_agent.schemas.task import TaskManifest

    task = TaskManifest.from_code("tests/blocked", "class Model: pass\n")
    diagnostics = Diagnostics(
        baseline_host={"eager": {"calls": 104, "over_spin": 104, "retakes": 2, "spin_blocked": 103,
                                 "max_enqueue_ms": 23.1}},
        candidate_host={"calls": 103, "over_spin": 103, "spin_blocked": 100, "max_enqueue_ms": 143.2})
    row = row_from_result(task, CandidateResult(task_id=task.id, phase="grade", status=Status.correct,
                                                diagnostics=diagnostics), 1.0)
    assert row.baseline_host["eager"]["spin_blocked"] == 103
    assert row.candidate_host == {"calls": 103, "over_spin": 103, "spin_blocked": 100, "max_enqueue_ms": 143.2}


def test_the_sessions_count_of_the_runners_calls() -> None:
    """Diagnostics.candidate_host, summed by the session from each call's reply (harness/timing.py add_call_host)."""
    from cuda_agent.harness.timing import add_call_host

    total: dict[str, float] = {}
    add_call_host(total, 0.5, 0.0, False)  # CPU: no spin, nothing to count
    assert total == {}
    for enqueue_ms, spin_us, blocked in [(23.0, 200.0, False), (57.0, 34_800.0, False), (23.4, 200.0, True),
                                         (0.1, 200.0, False)]:
        add_call_host(total, enqueue_ms, spin_us, blocked)
    assert total == {"calls": 4, "over_spin": 3, "spin_blocked": 1, "max_enqueue_ms": 57.0}
