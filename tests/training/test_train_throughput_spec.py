"""benchmarks/train_throughput.py's engine specs: which EngineSettings each name and modifier stands for."""

from __future__ import annotations

import pytest

from cuda_agent.training.settings import EngineSettings


def test_engine_specs_map_to_settings(benchmark_module):
    bench = benchmark_module("train_throughput")
    base = EngineSettings(zero_stage=1, dtype="bf16")
    assert bench.engine_settings("plain", base) is None
    z0 = bench.engine_settings("deepspeed_bf16/z0", base)
    assert (z0.zero_stage, z0.master_weights) == (0, "bf16")
    ds = bench.engine_settings("deepspeed/nooverlap", base)
    assert (ds.zero_stage, ds.master_weights, ds.zero_overlap_comm) == (1, "fp32", "off")
    assert base.zero_stage == 1  # the base settings are not modified


@pytest.mark.parametrize("spec,message", [("plain/z0", "DeepSpeed engines only"), ("deepspeed_bf16/z9", "unknown modifier"),
                                          ("torch", "unknown engine")])
def test_bad_engine_specs_are_refused_with_the_valid_choices(spec, message, benchmark_module):
    with pytest.raises(ValueError, match=message):
        benchmark_module("train_throughput").engine_settings(spec, EngineSettings())
