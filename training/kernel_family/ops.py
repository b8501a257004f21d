"""The elementwise operators of the family: how the task calls each one, and how a kernel computes it.

Each :class:`FamilyOp` carries the data pipeline's :class:`OperatorSpec` (so tasks are composed and
rendered by ``cuda_agent.training.synthesis`` exactly as mined operators are) and one C expression of
the float ``v`` that both the C++/OpenMP and the CUDA writer emit (``expf``, ``tanhf``... exist on both).
The expressions follow torch's definitions (``softplus`` and ``mish`` switch to the identity above 20
as torch does; ``gelu`` is the exact erf form), so a correct kernel matches within the harness's
tolerance on every input of the declared domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cuda_agent.training.synthesis.operators import Domain, OperatorSpec, ValueRange


@dataclass(frozen=True)
class FamilyOp:
    """One elementwise operator: its pipeline spec and its kernel expression."""

    key: str
    spec: OperatorSpec
    expr: str  # C expression of the float ``v`` (the value after the previous operators)
    cost: int = 1  # transcendental calls: a rough compute weight (fast-math variants use intrinsics)

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """The operator in torch (what the task's ``forward`` computes)."""
        mod = F if self.spec.source == "torch.nn.functional" else torch
        return getattr(mod, self.spec.attr)(x)

    def c_expr(self, var: str = "v") -> str:
        """The expression with ``v`` renamed to ``var``."""
        return re.sub(r"\bv\b", var, self.expr)


def _op(key: str, source: str, attr: str, expr: str, domain: Domain = "real", out: ValueRange = "real",
        cost: int = 1) -> FamilyOp:
    spec = OperatorSpec(name=f"{source}.{attr}", source=source, attr=attr, call="function", family="elementwise",
                        ranks=[2, 3, 4], domain=domain, output_range=out, example_shape=[16, 64])
    return FamilyOp(key=key, spec=spec, expr=expr, cost=cost)


_T, _F = "torch", "torch.nn.functional"

#: The family's operators. Each expression's only variable is ``v`` (``c_expr`` renames it).
OPS: dict[str, FamilyOp] = {o.key: o for o in [
    _op("relu", _T, "relu", "fmaxf(v, 0.0f)", out="nonneg", cost=0),
    _op("sigmoid", _T, "sigmoid", "1.0f / (1.0f + expf(-v))", out="unit"),
    _op("tanh", _T, "tanh", "tanhf(v)", out="sym_unit"),
    _op("silu", _F, "silu", "v / (1.0f + expf(-v))"),
    _op("gelu", _F, "gelu", "0.5f * v * (1.0f + erff(v * 0.70710678f))"),
    _op("softplus", _F, "softplus", "(v > 20.0f ? v : log1pf(expf(v)))", out="positive", cost=2),
    _op("elu", _F, "elu", "(v > 0.0f ? v : expf(v) - 1.0f)"),
    _op("leaky_relu", _F, "leaky_relu", "(v > 0.0f ? v : 0.01f * v)", cost=0),
    _op("hardtanh", _F, "hardtanh", "fminf(fmaxf(v, -1.0f), 1.0f)", cost=0),
    _op("hardsigmoid", _F, "hardsigmoid", "fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f)", out="nonneg", cost=0),
    _op("hardswish", _F, "hardswish", "v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f", cost=0),
    _op("mish", _F, "mish", "v * tanhf(v > 20.0f ? v : log1pf(expf(v)))", cost=3),
    _op("abs", _T, "abs", "fabsf(v)", out="nonneg", cost=0),
    _op("neg", _T, "neg", "-v", cost=0),
    _op("sin", _T, "sin", "sinf(v)"),
    _op("cos", _T, "cos", "cosf(v)"),
    _op("square", _T, "square", "v * v", out="nonneg", cost=0),
    _op("erf", _T, "erf", "erff(v)", out="sym_unit"),
    _op("atan", _T, "atan", "atanf(v)"),
    _op("exp", _T, "exp", "expf(v)", out="positive"),
    _op("sqrt", _T, "sqrt", "sqrtf(v)", domain="nonneg", out="nonneg"),
    _op("log", _T, "log", "logf(v)", domain="positive"),
    _op("rsqrt", _T, "rsqrt", "1.0f / sqrtf(v)", domain="positive", out="positive"),
]}

#: Operators whose output can grow without bound; two of them in one chain (or one after another growth)
#: can overflow float32, so a chain holds at most one.
GROWING = frozenset({"exp", "square", "softplus"})



def chain_apply(keys: list[str], x: torch.Tensor) -> torch.Tensor:
    """The chain ``keys`` applied to ``x`` in torch."""
    for k in keys:
        x = OPS[k].apply(x)
    return x
