"""Rule-based composition: deterministic, shape- and domain-correct (tasks executed with real torch)."""

from __future__ import annotations

import random

import pytest
import torch

from cuda_agent.training.synthesis.compose_rules import ChainError, ComposeSettings, RuleComposer, SizeSpace, plan_fixed_chain
from cuda_agent.training.synthesis.operators import range_satisfies
from cuda_agent.training.synthesis.task_render import render_task

pytestmark = pytest.mark.slow  # needs the mined catalog


def test_candidates_are_deterministic_per_seed_and_index(catalog):
    a = RuleComposer(catalog, seed=3)
    b = RuleComposer(list(reversed(catalog)), seed=3)
    assert a.compose(7).code == b.compose(7).code
    assert a.compose(7).code != RuleComposer(catalog, seed=4).compose(7).code


def test_composed_tasks_run_with_the_declared_shapes(catalog, run_task_code):
    settings = ComposeSettings(sizes=SizeSpace(batch=[2], features=[16, 32], channels=[3, 4], spatial=[8, 12], seq=[8]))
    composer = RuleComposer(catalog, settings, seed=0)
    tasks = [composer.compose(i) for i in range(40)]
    for t in tasks:
        out = run_task_code(t.code)
        assert list(out.shape) == t.shapes["output"], t.code
        assert 1 <= len(t.ops) <= 5
        assert not t.stochastic
    assert sum(len(t.ops) >= 3 for t in tasks) >= 0.3 * len(tasks)
    assert len({tuple(t.ops) for t in tasks}) >= 30


def test_domains_are_respected_along_the_chain(catalog):
    composer = RuleComposer(catalog, seed=1)
    for i in range(60):
        plan_ops = [next(s for s in catalog if s.name == n) for n in composer.compose(i).ops]
        value_range = {"real": "real", "positive": "positive", "nonneg": "positive", "sym_unit": "sym_unit"}[plan_ops[0].domain]
        for op in plan_ops:
            assert range_satisfies(value_range, op.domain), (i, [o.name for o in plan_ops])
            value_range = value_range if op.output_range == "same" else op.output_range


def test_fixed_chain_rejects_what_does_not_fit(catalog, run_task_code):
    ops = {s.name: s for s in catalog}
    with pytest.raises(ChainError, match="needs positive inputs"):
        plan_fixed_chain([ops["torch.nn.Linear"], ops["torch.log"]], random.Random(0), SizeSpace())
    with pytest.raises(ChainError, match="ranks"):
        plan_fixed_chain([ops["torch.nn.Linear"], ops["torch.nn.Conv2d"]], random.Random(0), SizeSpace(), rank=2)
    plan = plan_fixed_chain([ops["torch.exp"], ops["torch.log"], ops["torch.nn.Linear"]], random.Random(0), SizeSpace(), rank=2)
    out = run_task_code(render_task(plan))
    assert list(out.shape) == plan.output_shape and torch.isfinite(out).all()
