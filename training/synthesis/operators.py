"""Seed operators: one :class:`OperatorSpec` per mined torch/transformers operator.

A spec says how to construct the operator, how to call it, which tensors it
accepts (ranks, dtypes, value domain), what it returns (shape rule, value
range), and whether it is stochastic. Specs are plain data (JSONL-friendly),
so composing tasks needs no torch import; :func:`render_single_op_task`
turns one spec into a stand-alone KernelBench-format module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: Value domains an operator may require of its input (ordered by strictness).
Domain = Literal["real", "nonneg", "positive", "sym_unit"]
#: Value ranges an operator's output may be known to lie in; "same" keeps the input's range.
ValueRange = Literal["real", "nonneg", "positive", "unit", "sym_unit", "same"]

#: Operator families: each has one shape rule, implemented by the composer.
Family = Literal[
    "elementwise",  # same shape, any rank
    "dim_op",  # same shape, acts along a dim given by call kwarg 'dim'
    "reduce",  # reduces one dim with keepdim=True
    "norm_last",  # normalises the last dim; ctor takes its size
    "norm_channel",  # normalises dim 1; ctor takes its size (and groups)
    "linear",  # last dim in -> out
    "conv",  # dim 1 in -> out channels, spatial dims shrink/keep by kernel/padding/stride
    "conv_transpose",  # dim 1 in -> out channels, spatial dims grow
    "pool",  # spatial dims divided by kernel
    "adaptive_pool",  # spatial dims set to output size
    "flatten",  # dims 1.. merged
    "scale_param",  # x * learnable per-channel/feature parameter
    "bias_param",  # x + learnable per-channel/feature parameter
]

#: Which output ranges satisfy which required domains.
_SATISFIES: dict[str, set[str]] = {
    "real": {"real", "nonneg", "positive", "unit", "sym_unit"},
    "nonneg": {"nonneg", "positive", "unit"},
    "positive": {"positive", "unit"},
    "sym_unit": {"unit", "sym_unit"},
}


def range_satisfies(value_range: str, domain: str) -> bool:
    """True when every value of ``value_range`` lies in ``domain``.

    >>> range_satisfies("unit", "positive"), range_satisfies("real", "positive")
    (True, False)
    """
    return value_range in _SATISFIES[domain]


def next_range(current: str, produced: str) -> str:
    """Range after an operator that produces ``produced`` from an input in ``current``."""
    return current if produced == "same" else produced


class InputGenerator(BaseModel):
    """How ``get_inputs()`` draws a tensor that lies in an operator's domain."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["normal", "uniform"] = Field("normal", description="torch.randn ('normal') or torch.rand scaled ('uniform').")
    low: float = Field(0.0, description="Lower end of the uniform range (ignored for 'normal').")
    high: float = Field(1.0, description="Upper end of the uniform range (ignored for 'normal').")
    dtype: str = Field("float32", description="torch dtype name without 'torch.'.")

    def expression(self, shape_expr: str) -> str:
        """Python source drawing the tensor, e.g. ``torch.rand(a, b) * 1.0 + 0.1``."""
        dtype = "" if self.dtype == "float32" else f", dtype=torch.{self.dtype}"
        if self.kind == "normal":
            return f"torch.randn({shape_expr}{dtype})"
        scale = self.high - self.low
        return f"torch.rand({shape_expr}{dtype}) * {scale!r} + {self.low!r}"


def generator_for_domain(domain: str, dtype: str = "float32") -> InputGenerator:
    """The input generator used for a chain whose first operator requires ``domain``."""
    if domain == "real":
        return InputGenerator(kind="normal", dtype=dtype)
    if domain in ("nonneg", "positive"):
        return InputGenerator(kind="uniform", low=0.1, high=2.1, dtype=dtype)
    return InputGenerator(kind="uniform", low=-0.9, high=0.9, dtype=dtype)


class OperatorSpec(BaseModel):
    """One seed operator, as mined and validated by probing."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Unique name: '<source>.<attr>' plus a variant suffix, e.g. 'torch.nn.Conv2d'.")
    source: str = Field(description="Module the operator is imported from: 'torch', 'torch.nn', 'torch.nn.functional', 'transformers.activations'...")
    attr: str = Field(description="Attribute name inside ``source`` (class, function or Tensor method name).")
    call: Literal["module", "function", "method"] = Field(
        description="'module': an nn.Module built in __init__ and called in forward; 'function': f(x, **kw); 'method': x.attr(**kw)."
    )
    family: Family = Field(description="Shape-rule family (see operators.Family).")
    ranks: list[int] = Field(description="Input ranks the operator accepts.")
    ctor_kwargs: dict[str, Any] = Field(default_factory=dict, description="Fixed literal constructor keyword arguments (modules only).")
    call_kwargs: dict[str, Any] = Field(default_factory=dict, description="Fixed literal keyword arguments of the call.")
    domain: Domain = Field("real", description="Values the input must lie in (log/sqrt need 'positive', atanh 'sym_unit').")
    output_range: ValueRange = Field("real", description="Values the output is known to lie in; 'same' keeps the input's.")
    stochastic: bool = Field(False, description="Two calls on the same input can differ (dropout, rrelu in train mode, random ops).")
    dtypes: list[str] = Field(default_factory=lambda: ["float32"], description="Input dtypes the operator was validated with.")
    spatial_dims: int = Field(0, description="Spatial dims for conv/pool families (1, 2 or 3); 0 otherwise.")
    example_shape: list[int] = Field(description="Input shape the operator was probed with (also used by render_single_op_task).")
    example_output_shape: list[int] = Field(default_factory=list, description="Output shape observed on example_shape.")
    output_shape_rule: str = Field("", description="Human-readable output shape rule, e.g. '[N, out, L]'.")
    requires: list[str] = Field(default_factory=list, description="Python distributions the rendered task imports beyond torch (e.g. 'transformers').")
    version: str = Field("", description="Version of the source library the spec was mined from.")

    @property
    def short(self) -> str:
        """Identifier-safe short name used for attribute names in rendered tasks."""
        base = self.attr.lower().replace(".", "_")
        return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base)

    @property
    def generator(self) -> InputGenerator:
        """Input generator satisfying this operator's domain."""
        return generator_for_domain(self.domain, self.dtypes[0])


def write_catalog(specs: Iterable[OperatorSpec], path: Path) -> int:
    """Write specs as JSONL (one per line, sorted by name); returns the count."""
    rows = sorted(specs, key=lambda s: s.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(s.model_dump(mode="json"), sort_keys=True) + "\n" for s in rows))
    tmp.replace(path)
    return len(rows)


def read_catalog(path: Path) -> list[OperatorSpec]:
    """Read a catalog written by :func:`write_catalog`."""
    if not path.exists():
        raise FileNotFoundError(f"operator catalog {path} does not exist; run 'cuda-agent data mine' first")
    return [OperatorSpec.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def render_single_op_task(spec: OperatorSpec) -> str:
    """A stand-alone KernelBench-format module (Model, get_inputs, get_init_inputs) for one operator."""
    from cuda_agent.training.synthesis.task_render import render_chain_for_single

    return render_chain_for_single(spec)
