"""Timing presets per device kind, and how backends take the public settings (device values are not baked in)."""

from __future__ import annotations

import pytest

from cuda_agent.config import RunConfig, load_config
from cuda_agent.errors import ConfigError
from cuda_agent.harness.baselines import baseline_key
from cuda_agent.harness.settings import HarnessSettings, IntegritySettings
from cuda_agent.harness.timing_protocol import resolve_protocol
from cuda_agent.plugins.backends._common import KernelBackendConfig
from cuda_agent.plugins.backends.cpu import CpuBackend
from cuda_agent.plugins.backends.cuda import CudaBackend


def test_backends_hold_the_public_settings_and_resolve_the_preset_per_device() -> None:
    cuda, cpu = CudaBackend(), CpuBackend()  # constructing them needs no GPU
    assert cuda.config.harness == HarnessSettings() == cpu.config.harness
    assert cuda.config.harness.model_fields_set == set()  # nothing set by the backend
    assert resolve_protocol(cuda.config.harness.timing.preset, "cuda").timer.preroll_us == 200.0
    assert resolve_protocol(cpu.config.harness.timing.preset, "cpu").timer.preroll_us == 0.0


def test_a_block_set_in_the_config_reaches_the_backend_unchanged() -> None:
    config = KernelBackendConfig(harness=HarnessSettings(timing={"preset": "quick"}, verify={"input_sets": 8}))
    harness = CudaBackend(config).config.harness
    assert harness.timing.preset == "quick" and harness.verify.input_sets == 8
    assert resolve_protocol("quick", "cuda").grade_rounds == 1


def test_an_old_key_in_a_run_config_fails_with_its_new_place(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Harness settings enter a run as ``plugins.<backend>.harness``; the backend's config model validates the
    block when the backend is built, and a key of the earlier flat layout names what replaced it."""
    config = load_config(RunConfig, overrides=["plugins.cpu.harness.n_input_sets=3"])
    with pytest.raises(ValueError, match="'n_input_sets' moved: use 'verify.input_sets'"):
        KernelBackendConfig.model_validate(config.plugins["cpu"])
    good = load_config(RunConfig, overrides=["plugins.cpu.harness.verify.input_sets=3"])
    assert KernelBackendConfig.model_validate(good.plugins["cpu"]).harness.verify.input_sets == 3
    with pytest.raises(ConfigError, match="not key=value"):
        load_config(RunConfig, overrides=["plugins.cpu.harness.verify.input_sets"])


def test_weakened_integrity_is_named_and_grading_keeps_the_defaults() -> None:
    weak = IntegritySettings(isolation="process", fresh_set_calls=1, determinism_check=False, wall_clock_slack=0.5)
    assert weak.weakened() == ["isolation=process", "fresh_set_calls=1", "determinism_check=false",
                               "wall_clock_slack=0.5"]
    assert weak.for_grading() == IntegritySettings()
    strict = IntegritySettings(isolation="bwrap", fresh_set_calls=8, wall_clock_slack=0.99, sanitizer="memcheck")
    assert strict.weakened() == []
    graded = strict.for_grading()  # stricter choices stay; the sanitizer belongs to verify
    assert (graded.isolation, graded.fresh_set_calls, graded.wall_clock_slack, graded.sanitizer) == \
        ("bwrap", 8, 0.99, "off")


def test_preroll_is_part_of_the_baseline_key() -> None:
    args = ("hash", "NVIDIA H200", "2.11", "eager", "ours", "default", 1)
    assert baseline_key(*args) == baseline_key(*args, 0.0)  # keys of runs without a spin are unchanged
    assert baseline_key(*args, 200.0) != baseline_key(*args)
    assert baseline_key(*args, 200.0) != baseline_key(*args, 100.0)


def test_cuda_times_net_of_the_protocol_cost_and_its_baselines_are_keyed_apart() -> None:
    from cuda_agent.harness.timing_stats import NET_FLOOR_MS, net_of_overhead

    assert resolve_protocol("standard", "cuda").net_overhead is False  # an experiment, never a preset
    net = resolve_protocol("standard", "cuda", {"net_overhead": True})
    assert net.method_id("cuda") == "events_l2flush_net" and resolve_protocol("standard", "cuda").method_id("cuda") == "events_l2flush"
    assert net.method_id("cpu") == "host_sync"  # the CPU backend never subtracts
    assert net_of_overhead(0.0183, 0.0032) == 0.0183 - 0.0032
    assert net_of_overhead(0.002, 0.0032) == NET_FLOOR_MS  # a call at the protocol's own cost is never <= 0
    # A "cost" read while other processes used the GPU (0.3 ms was seen) is not subtracted.
    assert net_of_overhead(0.138, 0.31) == 0.138 and net_of_overhead(0.138, 0.0) == 0.138
    args = ("hash", "H200", "2.11", "eager", "ours", "default", 1, 200.0)
    assert baseline_key(*args, True) != baseline_key(*args, False)  # a raw baseline is never reused as a net one


def test_net_timing_without_a_spin_is_refused_on_cuda() -> None:
    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.harness.experiments import ExperimentSettings

    with pytest.raises(ValueError, match="needs a pre-roll spin"):
        Evaluator("cuda", experiments=ExperimentSettings(timing={"net_overhead": True, "timer": {"preroll_us": 0.0}}))
