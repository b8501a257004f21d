"""Unit behaviour of the comparison and timing primitives (in-process, fast)."""

from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.harness.compare import compare_output, fingerprint
from cuda_agent.harness.settings import HarnessSettings, VerifySettings
from cuda_agent.harness.timing import DeviceTimer
from cuda_agent.harness.timing_protocol import TimingProtocol, resolve_protocol
from cuda_agent.harness.timing_stats import TimingLock, median_rel_ci, precise_enough, speed_of_light_ms, summarize
from cuda_agent.schemas.task import PrecisionContract


def test_equal_outputs_pass() -> None:
    x = torch.randn(4, 8)
    assert compare_output(x, x.clone(), atol=1e-2, rtol=1e-2) == []


def test_mismatch_report_is_actionable() -> None:
    e = torch.zeros(4, 8)
    a = e.clone()
    a[2, 5] = 3.0
    errs = compare_output(e, a, atol=1e-2, rtol=1e-2, input_set=1, index=0)
    assert [x.check for x in errs] == ["tolerance"]
    msg = errs[0].message
    assert "1 of 32" in msg and "max abs error 3" in msg and "[2, 5]" in msg
    assert errs[0].details["worst_index"] == [2, 5]
    assert errs[0].input_set == 1


def test_nan_never_passes_even_against_nan() -> None:
    e = torch.full((3,), float("nan"))
    errs = compare_output(e, e.clone(), atol=1.0, rtol=1.0)
    assert any(x.check == "nan" for x in errs)


def test_inf_must_match() -> None:
    e = torch.tensor([1.0, float("inf")])
    assert compare_output(e, e.clone(), atol=1e-2, rtol=1e-2) == []
    bad = torch.tensor([1.0, 1e30])
    assert compare_output(e, bad, atol=1e-2, rtol=1e-2)


def test_dtype_shape_and_integer_checks() -> None:
    e = torch.zeros(2, 3)
    assert compare_output(e, e.double(), atol=1, rtol=1)[0].check == "dtype"
    assert compare_output(e, torch.zeros(3, 2), atol=1, rtol=1)[0].check == "shape"
    i = torch.arange(6)
    j = i.clone()
    j[4] = 0
    err = compare_output(i, j, atol=10, rtol=10)
    assert err and "exact match" in err[0].message


def test_tolerance_presets() -> None:
    paper = PrecisionContract()
    assert VerifySettings().tolerance_table(paper) == {"*": (1e-2, 1e-2)}  # every dtype alike
    assert VerifySettings().tolerance_table(PrecisionContract(tolerance="dtype"))["float32"] == (1e-4, 1e-4)
    assert VerifySettings().tolerance_table(PrecisionContract(atol=0.3))["*"] == (0.3, 1e-2)  # the task's override
    assert VerifySettings(atol=0.5).tolerance_table(PrecisionContract(atol=0.3))["*"][0] == 0.5  # ours wins


def test_fingerprint_sees_every_byte() -> None:
    x = torch.randn(100)
    y = x.clone()
    assert fingerprint(x) == fingerprint(y)
    y[57] += 1e-6
    assert fingerprint(x) != fingerprint(y)
    assert fingerprint(x) != fingerprint(x.view(10, 10))


def test_median_ci_and_stopping_rule() -> None:
    tight = [1.0 + 0.0001 * (i % 3) for i in range(30)]
    loose = [1.0, 2.0, 3.0, 0.5, 4.0, 1.5, 2.5, 3.5, 0.7, 5.0]
    assert median_rel_ci(tight) < 0.01
    assert median_rel_ci(loose) > 0.1
    assert precise_enough(tight, min_calls=10, max_calls=100, target_rel_ci=0.01)
    assert not precise_enough(loose, min_calls=5, max_calls=100, target_rel_ci=0.01)
    assert precise_enough(loose, min_calls=5, max_calls=10, target_rel_ci=0.01)
    assert math.isinf(median_rel_ci([1.0]))
    t = summarize([3.0, 1.0, 2.0], "host_sync", wall_ms=7.0)
    assert (t.median_ms, t.min_ms, t.max_ms, t.samples, t.wall_ms) == (2.0, 1.0, 3.0, 3, 7.0)


def test_speed_of_light_floor() -> None:
    # 1 GB moved on an H200 cannot take less than ~0.2 ms.
    floor = speed_of_light_ms(None, 1e9, "NVIDIA H200")
    assert floor is not None and 0.15 < floor < 0.3
    assert speed_of_light_ms(1e9, None, "x86_64") is None


def test_timing_lock_is_reentrant_in_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lock = TimingLock("test-dev", lock_dir=tmp_path)
    with lock, lock:
        assert lock.path.exists()


def test_timing_lock_excludes_threads_sharing_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two threads with one TimingLock object: the second waits until the first has left (re-entrant per thread only)."""
    import threading

    lock = TimingLock("test-threads", lock_dir=tmp_path)
    inside, release, second_in = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with lock, lock:  # nested in one thread: fine
            inside.set()
            release.wait(timeout=30)

    def second() -> None:
        with lock:
            second_in.set()

    t1 = threading.Thread(target=first)
    t1.start()
    assert inside.wait(timeout=30)
    t2 = threading.Thread(target=second)
    t2.start()
    assert not second_in.wait(timeout=0.5)  # blocked while the first thread holds the device
    release.set()
    t1.join(timeout=30)
    assert second_in.wait(timeout=30)
    t2.join(timeout=30)


def test_cpu_timer_measures_a_call() -> None:
    timer = DeviceTimer("cpu", flush_bytes=1 << 20)
    out, ms, host_ms = timer.time_call(lambda: torch.ones(10).sum())
    assert float(out) == 10.0 and ms >= 0 and ms == host_ms
    assert timer.method == "host_sync"


def test_settings_reject_unknown_keys_and_name_the_new_place_of_old_ones() -> None:
    with pytest.raises(Exception, match="extra"):
        HarnessSettings(n_input_set=3)  # type: ignore[call-arg]
    with pytest.raises(Exception, match="extra"):
        HarnessSettings(verify={"input_set": 3})
    with pytest.raises(Exception, match="'n_input_sets' moved: use 'verify.input_sets'"):
        HarnessSettings(n_input_sets=3)  # type: ignore[call-arg]
    with pytest.raises(Exception, match=r"'min_timed_calls' is part of the internal timing protocol.*'timing.preset'.*"
                                        r"ExperimentSettings.timing\['min_calls'\]"):
        HarnessSettings(min_timed_calls=3)  # type: ignore[call-arg]
    with pytest.raises(Exception, match="'spare_references' is for experiments only now: ExperimentSettings"):
        HarnessSettings(spare_references=0)  # type: ignore[call-arg]
    with pytest.raises(Exception, match="'timing' .* 'timing.preset'"):
        HarnessSettings(timing="ours")  # type: ignore[arg-type]


def test_baseline_time_budget_starts_after_the_first_batch(tmp_path) -> None:
    """torch.compile's first call (in the first batch) must not use up the baseline's timing budget."""
    import random
    import time

    from cuda_agent.harness.baselines import measure_baseline

    class SlowFirstBatch:  # stands in for the reference process: only its call latency matters here
        def __init__(self) -> None:
            self.batches = 0
            self.rng = random.Random(0)

        def prepare_baseline(self, which, k, compile_mode):  # type: ignore[no-untyped-def]
            return True

        def time_baseline(self, which, sets, n, warmup, compile_mode):  # type: ignore[no-untyped-def]
            self.batches += 1
            if self.batches == 1:
                time.sleep(0.6)  # "compiling"
            return [1.0 + self.rng.random() for _ in range(n)]  # too noisy to ever be precise enough

    protocol = TimingProtocol(max_batch_s=0.5, min_calls=10, max_calls=60, target_rel_ci=0.001)
    ref = SlowFirstBatch()
    timing = measure_baseline(ref, "compile", [0], protocol, "default", TimingLock("test-budget", lock_dir=tmp_path),
                              "host_sync")
    assert timing.samples == 60 and ref.batches == 6  # ran to the call cap, not stopped after the compile batch


def test_the_timer_protocol_reaches_both_child_processes_in_their_first_message(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The per-process part of the protocol (spin, retakes, flush, page warm-up) is the same object for the
    candidate's and the reference's timers, sent in their first message: no environment variables carry it."""
    from pathlib import Path

    from cuda_agent.harness.messages import TimerSpec
    from cuda_agent.harness.reference_client import ReferenceClient
    from cuda_agent.harness.sandbox import _candidate_env

    assert not any("TIMING" in k for k in _candidate_env("cpu", (3, 4), 1, 5))
    spec = TimerSpec(preroll_us=40.0, preroll_retakes=2, l2_flush_multiple=3.0, warm_input_pages=True)
    ref = ReferenceClient("cpu", threads=1, timer=spec, compile_threads=1)
    try:
        ref.start("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                  "def get_inputs():\n    return [torch.ones(2)]\ndef get_init_inputs():\n    return []\n")
        environ = Path(f"/proc/{ref.proc.pid}/environ").read_bytes().split(b"\0")
        assert not any(b"TIMING" in e for e in environ)
        assert b"TORCHINDUCTOR_COMPILE_THREADS=1" in environ  # one compile worker per warm reference process
    finally:
        ref.close()
    timer = DeviceTimer.from_spec("cpu", spec)  # CPU ignores the spin; a runner's timer never retakes
    assert timer.preroll_us == 40.0 and timer.preroll_retakes == 2 and timer.flush_buf.numel() * 4 >= 3 * (16 << 20)
    assert DeviceTimer.from_spec("cpu", spec, retakes=False).preroll_retakes == 0
    with pytest.raises(Exception, match="preroll_us"):
        TimerSpec(preroll_us=-1)


def test_timing_done_keeps_sampling_until_min_batch_s_but_never_past_the_cap():
    from cuda_agent.harness.timing_stats import timing_done

    tight = [1.0] * 30  # a median as precise as it gets
    plain = TimingProtocol(min_calls=10, max_calls=100, target_rel_ci=0.01)
    assert timing_done(tight, plain, elapsed_s=0.01)
    assert not timing_done(tight[:5], plain, elapsed_s=0.01)  # fewer than min_calls
    held = TimingProtocol(min_calls=10, max_calls=100, target_rel_ci=0.01, min_batch_s=0.5)
    assert not timing_done(tight, held, elapsed_s=0.2)  # precise, but not yet min_batch_s long
    assert timing_done(tight, held, elapsed_s=0.6)
    assert timing_done([1.0] * 100, held, elapsed_s=0.2)  # the cap of calls wins
    loose = [1.0, 2.0, 3.0] * 10
    assert not timing_done(loose, plain, elapsed_s=1.0)
    assert timing_done(loose, plain, elapsed_s=plain.max_batch_s + 1)  # the budget is spent


def test_presets_resolve_per_device_and_overrides_change_single_fields():
    cuda, cpu = resolve_protocol("standard", "cuda"), resolve_protocol("standard", "cpu")
    assert cuda.timer.preroll_us == 200.0 and cuda.timer.preroll_retakes == 2 and cuda.grade_calls() == 33
    assert cuda.target_rel_ci == 0.003 and cuda.max_calls == 600
    assert cpu.timer.preroll_us == 0.0 and cpu.fresh_set_slack == 0.25 and cpu.grade_calls() == 33
    quick = resolve_protocol("quick", "cpu")
    assert quick.grade_rounds == 1 and quick.max_calls < cpu.max_calls
    assert resolve_protocol("release", "cuda").method == "profiler_sum"
    tuned = resolve_protocol("standard", "cuda", {"min_calls": 7, "timer": {"preroll_us": 0.0}})
    assert tuned.min_calls == 7 and tuned.timer.preroll_us == 0.0 and tuned.timer.preroll_retakes == 2
    assert TimingProtocol(max_calls=30, min_calls=5).grade_calls() == 10
    assert TimingProtocol(max_calls=30, grade_calls_per_round=7).grade_calls() == 7
    with pytest.raises(ValueError, match="valid are standard, standard_fast, quick, release"):
        resolve_protocol("ours", "cpu")
