"""Device-specific harness defaults: filled in only where a config set nothing."""

from __future__ import annotations

from cuda_agent.harness.baselines import baseline_key
from cuda_agent.harness.settings import DEVICE_DEFAULTS, HarnessSettings
from cuda_agent.plugins.backends._common import KernelBackendConfig
from cuda_agent.plugins.backends.cpu import CpuBackend
from cuda_agent.plugins.backends.cuda import CudaBackend


def test_cuda_backend_takes_the_cuda_timing_defaults() -> None:
    backend = CudaBackend()  # constructing it needs no GPU
    harness = backend.config.harness
    for field, value in DEVICE_DEFAULTS["cuda"].items():
        assert getattr(harness, field) == value, field
    assert harness.timing_preroll_us == 200.0 and harness.target_rel_ci == 0.003
    assert harness.grade_calls() == 33


def test_a_field_set_in_the_config_wins_over_the_device_default() -> None:
    config = KernelBackendConfig(harness=HarnessSettings(timing_preroll_us=0.0, max_timed_calls=50))
    harness = CudaBackend(config).config.harness
    assert harness.timing_preroll_us == 0.0 and harness.max_timed_calls == 50
    assert harness.target_rel_ci == 0.003  # unset there, so the device's
    # The caller's config object is not modified.
    assert config.harness.target_rel_ci == HarnessSettings().target_rel_ci


def test_cpu_backend_keeps_the_generic_defaults_but_a_wider_fresh_set_slack() -> None:
    harness = CpuBackend().config.harness
    assert harness == HarnessSettings(fresh_set_slack=0.25)  # host-timed calls are noisier (DEVICE_DEFAULTS)
    assert harness.model_fields_set == set()  # a device default, not a user setting
    assert harness.timing_preroll_us == 0.0
    assert harness.grade_calls() == max(harness.min_timed_calls, harness.max_timed_calls // harness.grade_rounds)


def test_device_defaults_are_not_reported_as_user_settings() -> None:
    tuned = HarnessSettings(n_input_sets=3).with_device_defaults("cuda")
    assert tuned.model_fields_set == {"n_input_sets"}
    # Applying them twice changes nothing, and an unknown kind has none.
    assert tuned.with_device_defaults("cuda") == tuned
    assert HarnessSettings().with_device_defaults("tpu") == HarnessSettings()


def test_grade_calls_per_round_overrides_the_formula() -> None:
    assert HarnessSettings(max_timed_calls=30, min_timed_calls=5).grade_calls() == 10
    assert HarnessSettings(max_timed_calls=30, grade_calls_per_round=7).grade_calls() == 7


def test_preroll_is_part_of_the_baseline_key() -> None:
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1)
    assert baseline_key(*args) == baseline_key(*args, 0.0)  # keys of runs without a spin are unchanged
    assert baseline_key(*args, 200.0) != baseline_key(*args)
    assert baseline_key(*args, 200.0) != baseline_key(*args, 100.0)


def test_cuda_times_net_of_the_protocol_cost_and_its_baselines_are_keyed_apart() -> None:
    from cuda_agent.harness.timing import NET_FLOOR_MS, method_id, net_of_overhead

    assert CudaBackend().config.harness.timing_net_overhead is False  # opt-in until validated on a GPU
    assert CpuBackend().config.harness.timing_net_overhead is False
    assert method_id("cuda", True) == "events_l2flush_net" and method_id("cuda", False) == "events_l2flush"
    assert method_id("cpu", True) == "host_sync"  # the CPU backend never subtracts
    assert net_of_overhead(0.0183, 0.0032) == 0.0183 - 0.0032
    assert net_of_overhead(0.002, 0.0032) == NET_FLOOR_MS  # a call at the protocol's own cost is never <= 0
    # A "cost" read while other processes used the GPU (0.3 ms was seen) is not subtracted: honest kernels had been
    # reported at the floor.
    assert net_of_overhead(0.138, 0.31) == 0.138 and net_of_overhead(0.138, 0.0) == 0.138
    args = ("hash", "H200", "2.11", "eager", "ours", "default", 1, 200.0)
    assert baseline_key(*args, True) != baseline_key(*args, False)  # a raw baseline is never reused as a net one
