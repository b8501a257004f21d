"""A planned operator chain (:class:`TaskPlan`) and its KernelBench-format source.

The composers decide *what* to chain; this module only writes it out:
module-level sizes, ``Model.__init__`` taking the sizes it needs (passed by
``get_init_inputs()``), ``forward`` applying each step to ``x``, and
``get_inputs()`` drawing the input in the first operator's value domain, and
``CPU_SIZES``: the sizes (derived ones too) whose value differs on the CPU
backend (``cuda_agent.harness.tasks.apply_cpu_sizes`` applies them).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.training.synthesis.operators import InputGenerator, OperatorSpec

_HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


class PlannedStep(BaseModel):
    """One operator application inside a task."""

    model_config = ConfigDict(extra="forbid")

    op: OperatorSpec = Field(description="The operator applied.")
    attr_name: str = Field(description="Attribute holding the module/parameter on Model (modules and params only).")
    ctor_args: list[str] = Field(default_factory=list, description="Positional constructor arguments as Python expressions (size symbols or literals).")
    ctor_kwargs: dict[str, Any] = Field(default_factory=dict, description="Literal constructor keyword arguments.")
    call_kwargs: dict[str, Any] = Field(default_factory=dict, description="Literal call keyword arguments.")
    param_shape: str | None = Field(None, description="Size symbol holding the parameter shape (scale/bias params).")
    output_shape: list[int] = Field(description="Shape of x after this step.")
    cpu_output_shape: list[int] = Field(default_factory=list, description="Shape of x after this step at CPU_SIZES.")


class TaskPlan(BaseModel):
    """Everything needed to render one task module."""

    model_config = ConfigDict(extra="forbid")

    constants: dict[str, Any] = Field(description="Module-level sizes, in definition order (ints or tuples).")
    cpu_constants: dict[str, Any] = Field(default_factory=dict, description="The same sizes on the CPU backend (CPU_SIZES lists those that differ).")
    input_symbols: list[str] = Field(description="Size symbols (or literal ints as strings) of the input shape.")
    input_shape: list[int] = Field(description="Concrete input shape.")
    cpu_input_shape: list[int] = Field(default_factory=list, description="Input shape at CPU_SIZES.")
    generator: InputGenerator = Field(description="How get_inputs() draws x.")
    steps: list[PlannedStep] = Field(description="Operators in order.")

    @property
    def ops(self) -> list[str]:
        """Operator names in order."""
        return [s.op.name for s in self.steps]

    @property
    def output_shape(self) -> list[int]:
        """Shape of the task's output."""
        return self.steps[-1].output_shape if self.steps else self.input_shape

    @property
    def cpu_output_shape(self) -> list[int]:
        """Shape of the task's output at CPU_SIZES."""
        return self.steps[-1].cpu_output_shape if self.steps else self.cpu_input_shape

    @property
    def cpu_sizes(self) -> dict[str, Any]:
        """The ``CPU_SIZES`` entries: every size whose CPU value differs from the full one."""
        return {k: v for k, v in self.cpu_constants.items() if k in self.constants and v != self.constants[k]}


def _literal(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _kwargs(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_literal(v)}" for k, v in kwargs.items())


def _callee(op: OperatorSpec) -> str:
    if op.source == "torch.nn":
        return f"nn.{op.attr}"
    if op.source == "torch.nn.functional":
        return f"F.{op.attr}"
    if op.source.startswith("torch"):
        return f"{op.source}.{op.attr}"
    return op.attr  # imported by name (transformers)


def _init_params(plan: TaskPlan) -> list[str]:
    """Size symbols used by constructors, in order of first use."""
    seen: list[str] = []
    for step in plan.steps:
        refs = list(step.ctor_args) + ([step.param_shape] if step.param_shape else [])
        for ref in refs:
            if ref in plan.constants and ref not in seen:
                seen.append(ref)
    return seen


def _declared_domain(generator: InputGenerator) -> dict[str, float] | None:
    """The ``INPUT_DOMAINS`` entry for a restricted first-operator domain (read by cuda_agent.harness.tasks)."""
    if generator.kind == "normal":
        return None
    if generator.low >= 0:
        return {"low": 0.05}
    return {"low": -0.95, "high": 0.95}


def render_task(plan: TaskPlan, description: str = "") -> str:
    """The KernelBench-format module source of ``plan``."""
    lines = [_HEADER.rstrip("\n")]
    imports = sorted({f"from {s.op.source} import {s.op.attr}" for s in plan.steps if not s.op.source.startswith("torch")})
    lines += imports
    params = _init_params(plan)
    doc = description or " -> ".join(s.op.attr for s in plan.steps)
    lines += ["", "", "class Model(nn.Module):", f'    """{doc}."""', ""]
    lines.append(f"    def __init__(self{''.join(', ' + p for p in params)}):")
    lines.append("        super().__init__()")
    for step in plan.steps:
        if step.op.call == "module":
            args = ", ".join(step.ctor_args + ([_kwargs(step.ctor_kwargs)] if step.ctor_kwargs else []))
            lines.append(f"        self.{step.attr_name} = {_callee(step.op)}({args})")
        elif step.op.family in ("scale_param", "bias_param"):
            lines.append(f"        self.{step.attr_name} = nn.Parameter(torch.randn({step.param_shape}))")
    lines += ["", "    def forward(self, x):"]
    for step in plan.steps:
        kw = _kwargs(step.call_kwargs)
        if step.op.family == "scale_param":
            expr = f"x * self.{step.attr_name}"
        elif step.op.family == "bias_param":
            expr = f"x + self.{step.attr_name}"
        elif step.op.call == "module":
            expr = f"self.{step.attr_name}(x{', ' + kw if kw else ''})"
        elif step.op.call == "method":
            expr = f"x.{step.op.attr}({kw})"
        else:
            expr = f"{_callee(step.op)}(x{', ' + kw if kw else ''})"
        lines.append(f"        x = {expr}")
    lines += ["        return x", "", ""]
    for name, value in plan.constants.items():
        lines.append(f"{name} = {_literal(value)}")
    cpu = ", ".join(f"{k!r}: {_literal(v)}" for k, v in plan.cpu_sizes.items())
    lines.append(f"CPU_SIZES = {{{cpu}}}  # the CPU backend's variant (cuda_agent.harness.tasks.apply_cpu_sizes)")
    domain = _declared_domain(plan.generator)
    if domain:
        lines.append(f"INPUT_DOMAINS = {{0: {domain!r}}}  # valid values of input 0 (the first operator's domain)")
    shape_expr = ", ".join(plan.input_symbols)
    lines += ["", "", "def get_inputs():", f"    return [{plan.generator.expression(shape_expr)}]", "", ""]
    lines += ["def get_init_inputs():", f"    return [{', '.join(params)}]", ""]
    return "\n".join(lines)


def render_chain_for_single(spec: OperatorSpec) -> str:
    """Single-operator task for ``spec`` on its example shape (see operators.render_single_op_task)."""
    import random

    from cuda_agent.training.synthesis.compose_rules import SizeSpace, plan_fixed_chain

    sizes = SizeSpace.from_example(spec.example_shape)
    plan = plan_fixed_chain([spec], random.Random(0), sizes, rank=len(spec.example_shape))
    return render_task(plan)
