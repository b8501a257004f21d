"""The L2 flush's size as a harness setting, and the eager baseline timed under protocol variants inside a real
reference process (issue 4's spread diagnostics, ``benchmarks/eval_throughput.py --diagnose``), on CPU."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.harness.baselines import baseline_key
from cuda_agent.harness.reference import ReferenceError_, ReferenceProcess
from cuda_agent.harness.sandbox import _candidate_env
from cuda_agent.harness.settings import HarnessSettings
from cuda_agent.harness.timing import FLUSH_MULTIPLE_ENV, WARM_PAGES_ENV, DeviceTimer, l2_bytes

CODE = (
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.sum(x, dim=1, keepdim=True)\n"
    "def get_inputs():\n    return [torch.randn(64, 4096)]\n"
    "def get_init_inputs():\n    return []\n"
)

VARIANTS = {"graded", "standard", "write_2x", "write_4x", "write_8x", "read_2x", "read_4x", "touch_2x", "direct",
            "direct_warm", "spin_500", "spin_1000", "no_retakes"}


def test_the_flush_size_follows_the_environment_in_l2_multiples(monkeypatch) -> None:
    l2 = l2_bytes("cpu")
    monkeypatch.delenv(FLUSH_MULTIPLE_ENV, raising=False)
    assert DeviceTimer("cpu").flush_buf.numel() * 4 == 2 * l2  # the default: twice the L2
    monkeypatch.setenv(FLUSH_MULTIPLE_ENV, "3")
    assert DeviceTimer("cpu").flush_buf.numel() * 4 == 3 * l2
    assert DeviceTimer("cpu", flush_bytes=4 << 20).flush_buf.numel() * 4 == 4 << 20  # an explicit size wins
    for bad, says in (("0.5", "at least the L2"), ("lots", "not a number")):
        monkeypatch.setenv(FLUSH_MULTIPLE_ENV, bad)
        with pytest.raises(ValueError, match=says):
            DeviceTimer("cpu")


def test_the_flush_size_reaches_runner_and_reference_process_and_keys_the_baseline() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        HarnessSettings(timing_l2_flush_multiple=0.5)
    env = _candidate_env("cpu", (3, 4), 1, flush_multiple=4.0, warm_pages=True)
    assert (env[FLUSH_MULTIPLE_ENV], env[WARM_PAGES_ENV]) == ("4.0", "1")
    assert _candidate_env("cpu", (3, 4), 1)[WARM_PAGES_ENV] == "0"
    assert HarnessSettings().timing_warm_input_pages is True  # the protocol measured on the H200 (2026-12-01)
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 200.0, False, "any")
    assert baseline_key(*args) == baseline_key(*args, 2.0, False)  # keys of runs with the old protocol are unchanged
    assert len({baseline_key(*args), baseline_key(*args, 4.0), baseline_key(*args, 2.0, True)}) == 3
    ref = ReferenceProcess(CODE, "cpu", flush_multiple=3.0)
    try:
        got = ref.call("timing_variants", None, 2, 1)
        assert got["info"]["flush_bytes"] == 3 * l2_bytes("cpu")  # the process's own timer
        assert got["info"]["warm_pages"] is False  # CPU: nothing to warm
    finally:
        ref.close()


def test_every_variant_is_timed_per_placement_in_the_reference_process_itself() -> None:
    ref = ReferenceProcess(CODE, "cpu")
    try:
        for k in (0, 1):
            ref.call("make_set", k, 100 + k, None, "host", False)
        got = ref.call("timing_variants", [0, 1], 5, 2)
        assert set(got) == VARIANTS | {"null", "copy", "info"}
        assert got["info"]["pid"] == ref.proc.pid and (got["info"]["calls"], got["info"]["placements"]) == (5, 2)
        for name in VARIANTS:
            v = got[name]
            assert len(v["placements_ms"]) == 2 and v["median_ms"] == v["placements_ms"][0], name
            assert v["over_spin"] == [0, 0], name  # CPU: no spin to outlast
            assert 0 < v["min_ms"] <= v["median_ms"] and v["iqr_ms"] >= 0 and v["spread"] >= 0, (name, v)
        # A 1 MiB row sum takes longer than writing one element, whatever the machine.
        assert got["standard"]["median_ms"] > got["null"]["median_ms"]
        # None: sets of its own (a graded session's sets are gone by the time diagnostics run)
        own = ref.call("timing_variants", None, 3, 1)
        assert own["info"]["pid"] == ref.proc.pid and len(own["touch_2x"]["placements_ms"]) == 1
        refused = [(([0, 7], 5, 1), r"sets \[0, 7\] are not all made"), (([0], 1, 1), "calls must be"),
                   (([0], 5, 0), "placements must be"), (([0], 5, 1, "jit"), r"which must be one of \['eager', 'compile'\]")]
        for call, says in refused:
            with pytest.raises(ReferenceError_, match=says):
                ref.call("timing_variants", *call)
    finally:
        ref.close()


RECORDING = (
    "import torch\n"
    "SEEN = []\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        SEEN.append(x.data_ptr())\n"
    "        return {body}\n"
    "def get_inputs():\n    return [torch.randn(8, 64)]\n"
    "def get_init_inputs():\n    return []\n"
)


@pytest.mark.parametrize("clone_env", ["1", "0"])
def test_baselines_use_the_sets_own_tensors_only_where_the_model_leaves_them_unchanged(monkeypatch, clone_env) -> None:
    from cuda_agent.harness.reference import BASELINE_CLONE_ENV, ReferenceServer

    monkeypatch.setenv(BASELINE_CLONE_ENV, clone_env)
    for body, writes in (("x.sum(dim=1)", False), ("x.mul_(2.0).sum(dim=1)", True)):
        server = ReferenceServer(RECORDING.format(body=body), "cpu")
        server.make_set(0, 5, None, "host", False)
        pristine = server.sets[0]["inputs"][0].clone()
        own = server.sets[0]["inputs"][0].data_ptr()
        server.module.SEEN.clear()
        assert len(server.time_baseline("eager", [0], 4, 1, "default")) == 4
        direct = clone_env == "0" and not writes
        timed = server.module.SEEN[-5:]  # the warm-up call and four timed ones (after the check call, if any)
        assert all((p == own) is direct for p in timed), (body, clone_env)
        assert torch.equal(server.sets[0]["inputs"][0], pristine)  # the set itself is never written
        assert server._mutation.get("eager", writes) is writes


def test_the_clone_setting_reaches_the_reference_process_and_keys_the_baseline() -> None:
    from cuda_agent.harness.reference import BASELINE_CLONE_ENV

    assert HarnessSettings().baseline_clone_inputs is False  # measured on the H200 (2026-12-01)
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 200.0, False, "any", 2.0, True)
    assert baseline_key(*args) == baseline_key(*args, True) != baseline_key(*args, False)
    for clone in (True, False):
        ref = ReferenceProcess(CODE, "cpu", clone_inputs=clone)
        try:
            got = ref.call("timing_variants", None, 2, 1)
            assert got["info"]["clone_inputs"] is clone
        finally:
            ref.close()
    assert BASELINE_CLONE_ENV.startswith("CUDA_AGENT_")


def test_the_timer_counts_its_calls_and_their_host_time_until_taken() -> None:
    import time

    timer = DeviceTimer("cpu")
    for _ in range(3):
        timer.time_call(lambda: time.sleep(0.002))
    stats = timer.take_host_stats()
    assert stats["calls"] == 3 and stats["over_spin"] == 0  # CPU: no spin to outlast
    assert stats["max_enqueue_ms"] >= 2.0 and timer.last_enqueue_ms >= 2.0
    assert stats["retakes"] == 0  # CPU: nothing to retake
    assert timer.take_host_stats() == {"calls": 0, "over_spin": 0, "retakes": 0, "max_enqueue_ms": 0.0}


def test_a_model_that_writes_to_some_inputs_only_is_caught_after_its_first_batch(monkeypatch) -> None:
    from cuda_agent.harness.reference import BASELINE_CLONE_ENV, ReferenceServer

    monkeypatch.setenv(BASELINE_CLONE_ENV, "0")
    # Writes to its input only where the first element is positive: the check call on set 0 (negative) sees nothing.
    code = RECORDING.format(body="(x.mul_(2.0) if x[0, 0] > 0 else x).sum(dim=1)").replace(
        "return [torch.randn(8, 64)]", "x = torch.randn(8, 64).abs()\n    return [x if torch.rand(()) > 0.5 else -x]")
    server = ReferenceServer(code, "cpu")
    signs = {}
    for k in range(12):
        server.make_set(k, 40 + k, None, "host", False)
        signs[k] = bool(server.sets[k]["inputs"][0][0, 0] > 0)
    neg, pos = next(k for k, p in signs.items() if not p), next(k for k, p in signs.items() if p)
    pristine = server.sets[pos]["inputs"][0].clone()
    server.time_baseline("eager", [neg, pos], 4, 1, "default")  # the check call ran on `neg`: direct timing
    assert server._mutation["eager"] is True  # found by the fingerprints after the batch
    assert torch.equal(server.sets[pos]["inputs"][0], pristine)  # made again from its seed
    server.module.SEEN.clear()
    server.time_baseline("eager", [neg, pos], 4, 1, "default")
    own = {server.sets[k]["inputs"][0].data_ptr() for k in (neg, pos)}
    assert not own & set(server.module.SEEN)  # clones from now on
    assert torch.equal(server.sets[pos]["inputs"][0], pristine)


@pytest.mark.slow
def test_the_compiled_baseline_is_diagnosed_through_its_own_graded_path() -> None:
    ref = ReferenceProcess(CODE, "cpu")
    try:
        got = ref.call("timing_variants", None, 3, 1, "compile", timeout_s=600)
        assert got["info"]["which"] == "compile"
        assert got["graded"]["median_ms"] > 0 and got["spin_1000"]["placements_ms"][0] > 0
        stats = ref.call("baseline_host_stats")
        assert set(stats) == {"compile"} and stats["compile"]["calls"] >= 3 + 3  # warm-ups and timed calls
    finally:
        ref.close()


def test_calibration_is_retaken_while_another_process_inflated_it() -> None:
    from cuda_agent.harness.timing import MAX_OVERHEAD_MS, calibrated_overhead

    class Readings:  # stands in for a GPU shared with another process's untimed work (not reproducible on CPU)
        def __init__(self, values):  # type: ignore[no-untyped-def]
            self.values, self.calls = list(values), 0

        def measure_overhead(self) -> float:
            self.calls += 1
            return self.values.pop(0)

    clean = Readings([0.0032])
    assert calibrated_overhead(clean) == 0.0032 and clean.calls == 1
    busy_then_clean = Readings([0.034, 0.0031, 0.5])
    assert calibrated_overhead(busy_then_clean) == 0.0031 and busy_then_clean.calls == 2
    always_busy = Readings([0.034, 0.05, 0.04, 0.0031])
    assert calibrated_overhead(always_busy) == 0.04 > MAX_OVERHEAD_MS and always_busy.calls == 3  # then not subtracted
    assert calibrated_overhead(DeviceTimer("cpu")) == 0.0


def test_the_retake_rule_doubles_the_spin_or_covers_the_enqueue_up_to_the_cap() -> None:
    from cuda_agent.harness.timing import next_spin_us

    assert next_spin_us(200.0, 0.25, 5000.0) == 400.0  # 1.5 x 250 us is shorter than twice the spin
    assert next_spin_us(200.0, 0.6, 5000.0) == pytest.approx(900.0)  # a longer enqueue is covered with a margin
    assert next_spin_us(200.0, 40.0, 5000.0) == 5000.0  # never past the cap
    assert next_spin_us(4000.0, 0.1, 5000.0) == 5000.0


def test_retakes_reach_the_reference_process_not_the_runner_and_key_the_baseline(monkeypatch) -> None:
    from cuda_agent.harness.timing import PREROLL_MAX_ENV, PREROLL_RETAKES_ENV

    cuda = HarnessSettings().with_device_defaults("cuda")
    assert (cuda.timing_preroll_us, cuda.timing_preroll_retakes, cuda.timing_preroll_max_us) == (200.0, 2, 5000.0)
    assert HarnessSettings().with_device_defaults("cpu").timing_preroll_retakes == 0
    with pytest.raises(ValueError, match="less than or equal to 5"):
        HarnessSettings(timing_preroll_retakes=6)
    assert _candidate_env("cpu", (3, 4), 1, 200.0)[PREROLL_RETAKES_ENV] == "0"  # never the candidate's calls
    monkeypatch.setenv(PREROLL_RETAKES_ENV, "3")
    monkeypatch.setenv(PREROLL_MAX_ENV, "700")
    timer = DeviceTimer("cpu")
    assert (timer.preroll_retakes, timer.preroll_max_us) == (3, 700.0)
    assert timer.state()["preroll_retakes"] == 3  # part of the guarded protocol (T8)
    monkeypatch.setenv(PREROLL_RETAKES_ENV, "many")
    with pytest.raises(ValueError, match="not a number"):
        DeviceTimer("cpu")
    monkeypatch.delenv(PREROLL_RETAKES_ENV)
    monkeypatch.delenv(PREROLL_MAX_ENV)
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 200.0, False, "any", 2.0, True, False)
    assert baseline_key(*args) == baseline_key(*args, 0, 5000.0)  # keys of runs without retakes are unchanged
    assert len({baseline_key(*args), baseline_key(*args, 2), baseline_key(*args, 2, 900.0)}) == 3
    no_spin = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 0.0)
    assert baseline_key(*no_spin) == baseline_key(*no_spin, preroll_retakes=2)  # no spin: nothing retaken
    ref = ReferenceProcess(CODE, "cpu", preroll_retakes=2, preroll_max_us=900.0)
    try:
        info = ref.call("timing_variants", None, 2, 1)["info"]
        assert (info["preroll_retakes"], info["preroll_max_us"]) == (2, 900.0)
    finally:
        ref.close()


def test_a_timer_reports_how_it_sized_its_spin_and_the_runner_says_so_when_ready() -> None:
    from cuda_agent.harness.sandbox import CandidatePool

    assert DeviceTimer("cpu", preroll_us=200.0).spin_calibration() == {
        "preroll_us": 200.0, "cycles_per_us": 0.0, "probes_ms": []}  # nothing to calibrate without a GPU
    pool = CandidatePool("cpu", HarnessSettings(isolation="process", pool_size=1))
    proc = pool.acquire()
    try:
        assert proc.wait_ready()["spin"] == {"preroll_us": 0.0, "cycles_per_us": 0.0, "probes_ms": []}
        # Net timing's calibration sizes the spin again and takes the timer's guarded state anew: no violation.
        calibrated = proc.request(30, op="calibrate")
        assert calibrated["ok"] and calibrated["overhead_ms"] == 0.0 and calibrated["spin"]["probes_ms"] == []
        assert proc.request(30, op="guard")["violations"] == []
    finally:
        pool.release(proc)
        pool.close()


def test_net_timing_without_a_spin_is_refused_with_what_to_set() -> None:
    from cuda_agent.harness.evaluator import Evaluator

    with pytest.raises(ValueError, match=r"timing_net_overhead needs a pre-roll spin \(timing_preroll_us > 0; the "
                                         r"CUDA backend's default is 200.0\).*with_device_defaults\('cuda'\)"):
        Evaluator("cuda", HarnessSettings(timing_net_overhead=True))
    # The CUDA backend's settings have the spin; refused only for the lack of it (no GPU is touched before that).
    assert HarnessSettings(timing_net_overhead=True).with_device_defaults("cuda").timing_preroll_us == 200.0
