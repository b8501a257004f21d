"""The per-process timing protocol (flush size, page warm-up, clones, retakes) in the reference process's baselines,
and the benchmark-only diagnostics that time a baseline under protocol variants in a process of their own (issue 4's
spread diagnostics, ``benchmarks/eval_throughput.py --diagnose``), on CPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from cuda_agent.harness.baselines import baseline_key, key_for
from cuda_agent.harness.messages import TimerSpec
from cuda_agent.harness.reference import ReferenceServer
from cuda_agent.harness.reference_messages import MakeSet, Start
from cuda_agent.harness.timing import DeviceTimer, l2_bytes
from cuda_agent.harness.timing_protocol import resolve_protocol

CODE = (
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.sum(x, dim=1, keepdim=True)\n"
    "def get_inputs():\n    return [torch.randn(64, 4096)]\n"
    "def get_init_inputs():\n    return []\n"
)

VARIANTS = {"graded", "standard", "write_2x", "write_4x", "write_8x", "read_2x", "read_4x", "touch_2x", "direct",
            "direct_warm", "spin_500", "spin_1000", "no_retakes"}
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _variants_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_timing_variants", BENCHMARKS / "_timing_variants.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _server(code: str, clone_inputs: bool = False, **timer: object) -> ReferenceServer:
    return ReferenceServer(Start(code=code, device="cpu", timer=TimerSpec(**timer), clone_inputs=clone_inputs))


def test_the_flush_size_is_a_multiple_of_the_l2_and_keys_the_baseline() -> None:
    l2 = l2_bytes("cpu")
    assert DeviceTimer("cpu").flush_buf.numel() * 4 == 2 * l2  # the default: twice the L2
    assert DeviceTimer("cpu", flush_multiple=3).flush_buf.numel() * 4 == 3 * l2
    assert DeviceTimer("cpu", flush_bytes=4 << 20).flush_buf.numel() * 4 == 4 << 20  # an explicit size wins
    with pytest.raises(ValueError, match="at least the L2"):
        DeviceTimer("cpu", flush_multiple=0.5)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        TimerSpec(l2_flush_multiple=0.5)
    assert resolve_protocol("standard", "cuda").timer.warm_input_pages is True  # measured on the H200 (2026-12-01)
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 200.0, False, "any")
    assert baseline_key(*args) == baseline_key(*args, 2.0, False)  # keys of runs with the old protocol are unchanged
    assert len({baseline_key(*args), baseline_key(*args, 4.0), baseline_key(*args, 2.0, True)}) == 3
    server = _server(CODE, l2_flush_multiple=3.0)
    server.make_set(MakeSet(set=0, seed=1, exchange=None, transport="host", stage=False))
    server.baselines.time("eager", [0], 2, 1, "default")
    assert server.baselines.timer.flush_buf.numel() * 4 == 3 * l2  # the process's own timer, from its start message


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


@pytest.mark.parametrize("clone", [True, False])
def test_baselines_use_the_sets_own_tensors_only_where_the_model_leaves_them_unchanged(clone: bool) -> None:
    for body, writes in (("x.sum(dim=1)", False), ("x.mul_(2.0).sum(dim=1)", True)):
        server = _server(RECORDING.format(body=body), clone_inputs=clone)
        server.make_set(MakeSet(set=0, seed=5, exchange=None, transport="host", stage=False))
        pristine = server.sets[0].inputs[0].clone()
        own = server.sets[0].inputs[0].data_ptr()
        server.module.SEEN.clear()
        assert len(server.baselines.time("eager", [0], 4, 1, "default")) == 4
        direct = not clone and not writes
        timed = server.module.SEEN[-5:]  # the warm-up call and four timed ones (after the check call, if any)
        assert all((p == own) is direct for p in timed), (body, clone)
        assert torch.equal(server.sets[0].inputs[0], pristine)  # the set itself is never written
        assert server.baselines._mutation.get("eager", writes) is writes


def test_the_clone_setting_keys_the_baseline() -> None:
    assert resolve_protocol("standard", "cuda").baseline_clone_inputs is False  # measured on the H200 (2026-12-01)
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 200.0, False, "any", 2.0, True)
    assert baseline_key(*args) == baseline_key(*args, True) != baseline_key(*args, False)


def test_the_timer_counts_its_calls_and_their_host_time_until_taken() -> None:
    import time

    timer = DeviceTimer("cpu")
    for _ in range(3):
        timer.time_call(lambda: time.sleep(0.002))
    stats = timer.take_host_stats()
    assert stats["calls"] == 3 and stats["over_spin"] == 0  # CPU: no spin to outlast
    assert stats["max_enqueue_ms"] >= 2.0 and timer.last_enqueue_ms >= 2.0
    assert stats["retakes"] == 0  # CPU: nothing to retake
    assert timer.take_host_stats() == {"calls": 0, "over_spin": 0, "retakes": 0, "spin_blocked": 0,
                                       "max_enqueue_ms": 0.0}


def test_a_model_that_writes_to_some_inputs_only_is_caught_after_its_first_batch() -> None:
    # Writes to its input only where the first element is positive: the check call on set 0 (negative) sees nothing.
    code = RECORDING.format(body="(x.mul_(2.0) if x[0, 0] > 0 else x).sum(dim=1)").replace(
        "return [torch.randn(8, 64)]", "x = torch.randn(8, 64).abs()\n    return [x if torch.rand(()) > 0.5 else -x]")
    server = _server(code)
    signs = {}
    for k in range(12):
        server.make_set(MakeSet(set=k, seed=40 + k, exchange=None, transport="host", stage=False))
        signs[k] = bool(server.sets[k].inputs[0][0, 0] > 0)
    neg, pos = next(k for k, p in signs.items() if not p), next(k for k, p in signs.items() if p)
    pristine = server.sets[pos].inputs[0].clone()
    server.baselines.time("eager", [neg, pos], 4, 1, "default")  # the check call ran on `neg`: direct timing
    assert server.baselines._mutation["eager"] is True  # found by the fingerprints after the batch
    assert torch.equal(server.sets[pos].inputs[0], pristine)  # made again from its seed
    server.module.SEEN.clear()
    server.baselines.time("eager", [neg, pos], 4, 1, "default")
    own = {server.sets[k].inputs[0].data_ptr() for k in (neg, pos)}
    assert not own & set(server.module.SEEN)  # clones from now on
    assert torch.equal(server.sets[pos].inputs[0], pristine)


def test_every_variant_is_timed_per_placement_in_a_diagnostics_process_of_its_own() -> None:
    variants = _variants_module()
    timer = TimerSpec(preroll_retakes=2, preroll_max_us=900.0, l2_flush_multiple=3.0).model_dump()
    got = variants.run_in_own_process(CODE, "cpu", timer, clone_inputs=False, calls=5, placements=2)
    assert set(got) == VARIANTS | {"null", "copy", "info"}
    info = got["info"]
    assert (info["calls"], info["placements"]) == (5, 2) and info["clone_inputs"] is False
    assert info["flush_bytes"] == 3 * l2_bytes("cpu") and info["warm_pages"] is False  # CPU: nothing to warm
    assert (info["preroll_retakes"], info["preroll_max_us"]) == (2, 900.0)
    for name in VARIANTS:
        v = got[name]
        assert len(v["placements_ms"]) == 2 and v["median_ms"] == v["placements_ms"][0], name
        assert v["over_spin"] == [0, 0], name  # CPU: no spin to outlast
        assert 0 < v["min_ms"] <= v["median_ms"] and v["iqr_ms"] >= 0 and v["spread"] >= 0, (name, v)
    # A 1 MiB row sum takes longer than writing one element, whatever the machine.
    assert got["standard"]["median_ms"] > got["null"]["median_ms"]
    for bad, says in (({"calls": 1}, "calls must be"), ({"placements": 0}, "placements must be"),
                      ({"which": "jit"}, r"which must be one of \['eager', 'compile'\]")):
        with pytest.raises(RuntimeError, match=says):
            variants.run_in_own_process(CODE, "cpu", timer, clone_inputs=False, **{"calls": 3, "placements": 1, **bad})


def test_no_benchmark_diagnostics_are_left_in_the_trusted_processes() -> None:
    from cuda_agent.harness import reference_messages

    assert "timing_variants" not in reference_messages.REFERENCE_REQUESTS
    harness = Path(__file__).resolve().parents[2] / "harness"
    assert not (harness / "_timing_variants.py").exists() and not (harness / "_guard_fallback.py").exists()


def test_calibration_is_retaken_while_another_process_inflated_it() -> None:
    from cuda_agent.harness.timing_stats import MAX_OVERHEAD_MS, calibrated_overhead

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


def test_a_candidates_spin_follows_its_recent_host_enqueue_between_the_protocols_bounds() -> None:
    from cuda_agent.harness.timing import adaptive_spin_us

    assert adaptive_spin_us(200.0, [], 5000.0) == 200.0  # nothing seen yet: the protocol's spin
    assert adaptive_spin_us(200.0, [0.05, 0.1], 5000.0) == 200.0  # a host path inside the spin keeps it
    assert adaptive_spin_us(200.0, [0.3, 1.2, 0.4], 5000.0) == pytest.approx(1800.0)  # the longest, with a margin
    assert adaptive_spin_us(200.0, [40.0], 5000.0) == 5000.0  # never past the cap a baseline's retakes have
    # The default cap covers KernelBench level 3's longest host enqueue (71 ms, LSTMBidirectional on an H100): under
    # the old 5 ms cap the RNNs' calls outlasted every spin and an honest self-check read 0.71-0.80.
    assert adaptive_spin_us(200.0, [71.0], TimerSpec().preroll_max_us) == pytest.approx(106_500.0)
    spec = TimerSpec(preroll_us=200.0, preroll_retakes=2)
    assert (spec.candidate_spin_window, spec.baseline_spin_window) == (4, 4)
    runner, reference = DeviceTimer.from_spec("cpu", spec, retakes=False), DeviceTimer.from_spec("cpu", spec)
    # Both sides size a call's spin from their recent host enqueue; only the baseline's timer also retakes.
    assert (runner.spin_window, reference.spin_window) == (4, 4)
    assert (runner.preroll_retakes, reference.preroll_retakes) == (0, 2)
    assert DeviceTimer.from_spec("cpu", TimerSpec(candidate_spin_window=0), retakes=False).spin_window == 0
    assert DeviceTimer.from_spec("cpu", TimerSpec(baseline_spin_window=0, preroll_retakes=2)).spin_window == 0
    runner.time_call(lambda: None)
    assert not runner.recent_enqueue_ms and runner.recent_enqueue_ms.maxlen == 4  # CPU: no spin to size
    protocol = resolve_protocol("standard", "cuda", {"timer": {"candidate_spin_window": 0}})
    assert protocol.timer.candidate_spin_window == 0 and protocol.timer.preroll_retakes == 2


def test_retakes_reach_the_reference_process_not_the_runner_and_key_the_baseline() -> None:
    cuda = resolve_protocol("standard", "cuda").timer
    assert (cuda.preroll_us, cuda.preroll_retakes, cuda.preroll_max_us, cuda.baseline_spin_window) == (200.0, 2, 500_000.0, 4)
    assert resolve_protocol("standard", "cpu").timer.preroll_retakes == 0
    spec = TimerSpec(preroll_retakes=3, preroll_max_us=700.0)
    reference_timer, runner_timer = DeviceTimer.from_spec("cpu", spec), DeviceTimer.from_spec("cpu", spec, retakes=False)
    assert (reference_timer.preroll_retakes, reference_timer.preroll_max_us) == (3, 700.0)
    assert runner_timer.preroll_retakes == 0  # never the candidate's calls
    assert reference_timer.state()["preroll_retakes"] == 3  # part of the guarded protocol (T8)
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 200.0, False, "any", 2.0, True, False)
    assert baseline_key(*args) == baseline_key(*args, 0, 5000.0)  # keys of runs without retakes are unchanged
    assert len({baseline_key(*args), baseline_key(*args, 2), baseline_key(*args, 2, 900.0)}) == 3
    # A baseline whose first take's spin followed its recent host enqueue is another measurement: a cache never hands
    # one back for the other.
    assert baseline_key(*args, 2, 900.0) == baseline_key(*args, 2, 900.0, 0)
    assert baseline_key(*args, 2, 900.0, 4) not in {baseline_key(*args, 2, 900.0), baseline_key(*args, 2, 900.0, 2)}
    cuda_protocol = resolve_protocol("standard", "cuda")
    keys = {key_for("eager", code_hash="h", device_name="d", torch_version="t", protocol=p, compile_mode="default",
                    threads=1)
            for p in (cuda_protocol, resolve_protocol("standard", "cuda", {"timer": {"baseline_spin_window": 0}}))}
    assert len(keys) == 2
    no_spin = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1, 0.0)
    assert baseline_key(*no_spin) == baseline_key(*no_spin, preroll_retakes=2)  # no spin: nothing retaken
    server = _server(CODE, preroll_retakes=2, preroll_max_us=900.0)
    server.make_set(MakeSet(set=0, seed=1, exchange=None, transport="host", stage=False))
    server.baselines.time("eager", [0], 2, 1, "default")
    assert (server.baselines.timer.preroll_retakes, server.baselines.timer.preroll_max_us) == (2, 900.0)


def test_a_timer_reports_how_it_sized_its_spin_and_the_runner_says_so_when_ready(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cuda_agent.harness import messages as m
    from cuda_agent.harness.candidate_pool import CandidatePool
    from cuda_agent.harness.sandbox import RunnerOptions

    assert DeviceTimer("cpu", preroll_us=200.0).spin_calibration() == {
        "preroll_us": 200.0, "cycles_per_us": 0.0, "probes_ms": []}  # nothing to calibrate without a GPU
    pool = CandidatePool(RunnerOptions(device="cpu", isolation="process", scratch_dir=tmp_path), 1)
    proc = pool.acquire()
    try:
        assert proc.wait_ready().spin.model_dump() == {"preroll_us": 0.0, "cycles_per_us": 0.0, "probes_ms": []}
        # Net timing's calibration sizes the spin again and takes the timer's guarded state anew: no violation.
        calibrated = proc.request(30, m.Calibrate())
        assert calibrated.overhead_ms == 0.0 and calibrated.spin.probes_ms == []
        assert proc.request(30, m.Guard()).violations == []
    finally:
        pool.release(proc)
        pool.close()
