"""Seed operator mining from torch and transformers (real probing)."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.training.synthesis.operators import OperatorSpec, range_satisfies, read_catalog, render_single_op_task

pytestmark = pytest.mark.slow  # mining probes ~1000 torch callables once per session


def _by_name(specs: list[OperatorSpec]) -> dict[str, OperatorSpec]:
    return {s.name: s for s in specs}


def test_torch_mining_finds_operator_families_with_domains(mined):
    torch_report, _, _ = mined
    ops = _by_name(torch_report.specs)
    families = {s.family for s in torch_report.specs}
    assert {"elementwise", "dim_op", "reduce", "norm_last", "norm_channel", "linear", "conv", "pool"} <= families
    assert ops["torch.log"].domain == "positive"
    assert ops["torch.sqrt"].domain == "positive"
    assert ops["torch.atanh"].domain == "sym_unit"
    assert ops["torch.tanh"].domain == "real"
    assert ops["torch.exp"].output_range == "positive"
    assert ops["torch.nn.Conv2d"].spatial_dims == 2 and ops["torch.nn.Conv2d"].ranks == [4]
    assert len(torch_report.specs) > 100


def test_stochastic_operators_are_recorded_as_such(mined):
    ops = _by_name(mined[0].specs)
    assert ops["torch.nn.Dropout"].stochastic
    assert ops["torch.nn.RReLU"].stochastic  # random slope in train mode
    assert not ops["torch.nn.ReLU"].stochastic


def test_non_elementwise_and_constant_candidates_are_skipped_with_reasons(mined):
    skipped = mined[0].skipped
    assert "not elementwise" in skipped["torch.nn.functional.softmax"]  # implicit dim: rows depend on neighbours
    assert "torch.cumsum" in skipped  # needs a dim: mined through the shaped table instead
    assert all(reason for reason in skipped.values())


def test_transformers_activations_and_norms(mined):
    ops = _by_name(mined[1].specs)
    assert "transformers.activations.NewGELUActivation" in ops
    assert ops["transformers.models.llama.modeling_llama.LlamaRMSNorm"].family == "norm_last"
    assert all(s.requires == ["transformers"] for s in mined[1].specs)


def test_catalog_roundtrip_and_single_op_tasks_run(catalog_path):
    specs = _by_name(read_catalog(catalog_path))
    for name in ("torch.log", "torch.nn.Conv2d", "torch.nn.LayerNorm", "torch.sum",
                 "transformers.activations.NewGELUActivation"):
        code = render_single_op_task(specs[name])
        ns: dict = {}
        exec(compile(code, name, "exec"), ns)
        torch.manual_seed(0)
        model = ns["Model"](*ns["get_init_inputs"]())
        (x,) = ns["get_inputs"]()
        out = model(x)
        assert torch.isfinite(out).all(), name  # log gets positive inputs from its generator


def test_range_lattice():
    assert range_satisfies("unit", "positive") and range_satisfies("positive", "nonneg")
    assert not range_satisfies("nonneg", "positive") and not range_satisfies("real", "sym_unit")
