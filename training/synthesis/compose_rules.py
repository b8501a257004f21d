"""Rule-based composer: shape- and domain-aware chaining of up to 5 operators, no model.

Candidate ``i`` of seed ``s`` is drawn from ``random.Random(f"{s}:{i}")`` alone,
so every candidate is reproducible on its own (resumable builds regenerate
exactly the missing ones). The composer walks a state (shape as size
expressions, value range): each next operator must accept the rank and the
value range (``log`` only after ``exp``/``sigmoid``/..., or first with
positive inputs), and its family's shape rule gives the new state. Every
rule is checked at the full sizes and at the CPU sizes
(:mod:`.chain_state`), so each task renders with a valid ``CPU_SIZES``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.training.synthesis.chain_state import LEVELS, ChainState, Dim, paren
from cuda_agent.training.synthesis.operators import OperatorSpec, generator_for_domain, next_range, range_satisfies
from cuda_agent.training.synthesis.size_space import SizeKind, SizeSpace, cpu_size, default_cpu_sizes
from cuda_agent.training.synthesis.task_render import PlannedStep, TaskPlan, render_task

__all__ = ["ChainBuilder", "ChainError", "ComposeSettings", "ComposedTask", "RuleComposer", "SizeSpace", "plan_fixed_chain",
           "task_from_plan"]

#: Families whose cost dominates a chain (bounded per task by ``max_heavy_ops``).
HEAVY_FAMILIES = frozenset({"linear", "conv", "conv_transpose"})

#: Default relative weights when picking the next operator's family.
DEFAULT_FAMILY_WEIGHTS: dict[str, float] = {
    "elementwise": 3.0,
    "dim_op": 1.0,
    "reduce": 0.6,
    "norm_last": 1.0,
    "norm_channel": 1.0,
    "linear": 1.5,
    "conv": 1.5,
    "conv_transpose": 0.5,
    "pool": 0.8,
    "adaptive_pool": 0.3,
    "flatten": 0.3,
    "scale_param": 0.7,
    "bias_param": 0.7,
}


class ChainError(ValueError):
    """An operator cannot follow the current chain state (rank, domain or size, at full or CPU sizes)."""


def _draw(kind: SizeKind, rng: random.Random, sizes: SizeSpace, cpu: SizeSpace) -> tuple[int, int]:
    """A full size of ``kind`` drawn with ``rng`` and its CPU size (no extra draw)."""
    value = rng.choice(sizes.choices(kind))
    return value, cpu_size(kind, value, sizes, cpu)


def _start_dims(rank: int, op: OperatorSpec, rng: random.Random, sizes: SizeSpace, cpu: SizeSpace, state: ChainState) -> None:
    b = _draw("batch" if rank == 2 or not sizes.batch_nd else "batch_nd", rng, sizes, cpu)
    names: list[tuple[str, tuple[int, int]]]
    if rank == 2:
        names = [("batch_size", b), ("in_features", _draw("features", rng, sizes, cpu))]
    elif rank == 3 and op.family in ("norm_last", "linear") or rank == 3 and op.family not in ("conv", "conv_transpose", "pool", "adaptive_pool", "norm_channel") and rng.random() < 0.5:
        names = [("batch_size", b), ("seq_len", _draw("seq", rng, sizes, cpu)), ("hidden_size", _draw("features", rng, sizes, cpu))]
    elif rank == 3:
        names = [("batch_size", b), ("channels", _draw("channels", rng, sizes, cpu)), ("length", _draw("lengths", rng, sizes, cpu))]
    elif rank == 4:
        s = _draw("spatial", rng, sizes, cpu)
        names = [("batch_size", b), ("channels", _draw("channels", rng, sizes, cpu)), ("height", s), ("width", s)]
    else:
        raise ChainError(f"rank {rank} inputs are not composed (valid: 2, 3, 4)")
    for k, (level, space) in enumerate(zip(LEVELS, (sizes, cpu))):
        shape = [v[k] for _, v in names]
        if math.prod(shape) > space.max_elements:
            raise ChainError(f"input {shape} exceeds max_elements={space.max_elements} at {level} sizes")
    state.dims = [Dim(state.const(n, *v), n) for n, v in names]


def _check_weight(op: OperatorSpec, elements: list[int], sizes: SizeSpace, cpu: SizeSpace) -> None:
    """A Linear/Conv weight is bounded like an activation (a Linear after Flatten could ask for hundreds of GiB)."""
    for level, n, space in zip(LEVELS, elements, (sizes, cpu)):
        if n > space.max_elements:
            raise ChainError(f"{op.name}: weight of {n} elements exceeds max_elements={space.max_elements} at {level} sizes")


def _out_label(label: str) -> str:
    return "out_" + label.removeprefix("out_")


def _apply(op: OperatorSpec, state: ChainState, rng: random.Random, sizes: SizeSpace, cpu: SizeSpace, index: int) -> PlannedStep:
    """Plan ``op`` on ``state`` (checked at full and CPU sizes); raises ChainError when it does not fit."""
    rank = len(state.dims)
    if rank not in op.ranks:
        raise ChainError(f"{op.name} takes ranks {op.ranks}, chain is at rank {rank}")
    if not range_satisfies(state.value_range, op.domain):
        raise ChainError(f"{op.name} needs {op.domain} inputs, chain values are {state.value_range}")
    shapes = {level: state.shape(level) for level in LEVELS}
    shape = shapes["full"]
    attr = f"{ {'scale_param': 'scale', 'bias_param': 'bias'}.get(op.family, op.short)}_{index}"
    args: list[str] = []
    kwargs = dict(op.ctor_kwargs)
    call_kwargs = dict(op.call_kwargs)
    param_shape = None
    updates: dict[int, Dim] = {}
    fam = op.family
    if fam == "elementwise":
        pass
    elif fam == "dim_op":
        if "dim" in call_kwargs and rank > 2 and rng.random() < 0.5:
            call_kwargs["dim"] = 1
        if "dim" in kwargs and rank > 2 and rng.random() < 0.5:
            kwargs["dim"] = 1
    elif fam == "reduce":
        choices = [d for d in range(1, rank) if all(s[d] > 1 for s in shapes.values())]
        if not choices:
            raise ChainError(f"{op.name}: no dim of size > 1 left to reduce in shape {shape}")
        d = rng.choice(choices)
        call_kwargs["dim"] = d
        call_kwargs["keepdim"] = True
        updates[d] = Dim("1", "one")
    elif fam == "norm_last":
        if any(s[-1] < 2 for s in shapes.values()):
            raise ChainError(f"{op.name}: last dim has size {shapes}, normalising needs >= 2")
        args = [state.ref(-1)]
    elif fam == "norm_channel":
        if rank != op.spatial_dims + 2 or any(s[1] < 2 or math.prod(s[2:]) < 2 for s in shapes.values()):
            raise ChainError(f"{op.name}: needs rank {op.spatial_dims + 2} with channels >= 2 and spatial size >= 2, shape {shapes}")
        if op.attr == "GroupNorm":
            groups = [g for g in (2, 4, 8) if all(s[1] % g == 0 and g < s[1] for s in shapes.values())]
            if not groups:
                raise ChainError(f"{op.name}: channels {[s[1] for s in shapes.values()]} have no group count in (2, 4, 8)")
            g = rng.choice(groups)
            args = [state.const("num_groups", g, g), state.ref(1)]
        else:
            args = [state.ref(1)]
    elif fam == "linear":
        out = _draw("features", rng, sizes, cpu)
        _check_weight(op, [s[-1] * o for s, o in zip(shapes.values(), out)], sizes, cpu)
        args = [state.ref(-1), state.const("out_features", *out)]
        updates[rank - 1] = Dim(args[1], "out_features")
    elif fam in ("conv", "conv_transpose"):
        if rank != op.spatial_dims + 2:
            raise ChainError(f"{op.name} needs rank {op.spatial_dims + 2}, chain is at rank {rank}")
        k = _draw("kernel_sizes", rng, sizes, cpu)
        out = _draw("channels", rng, sizes, cpu)
        _check_weight(op, [s[1] * o * kv ** op.spatial_dims for s, o, kv in zip(shapes.values(), out, k)], sizes, cpu)
        for level, kv in zip(LEVELS, k):
            if any(s < kv for s in shapes[level][2:]):
                raise ChainError(f"{op.name}: spatial dims {shapes[level][2:]} smaller than kernel {kv} at {level} sizes")
        args = [state.ref(1), state.const("out_channels", *out), state.const("kernel_size", *k)]
        updates[1] = Dim(args[1], "out_channels")
        grow = 1 + 2 * int(kwargs.get("padding", 0))
        for d in range(2, rank):
            e = paren(state.dims[d].expr)
            expr = f"{e} - {args[2]} + {grow}" if fam == "conv" else f"{e} + {args[2]} - 1"
            updates[d] = Dim(expr, _out_label(state.dims[d].label))
    elif fam == "pool":
        k = _draw("pool_sizes", rng, sizes, cpu)
        if rank != op.spatial_dims + 2 or any(s < 2 * kv for level, kv in zip(LEVELS, k) for s in shapes[level][2:]):
            raise ChainError(f"{op.name}: needs rank {op.spatial_dims + 2} with spatial dims >= 2 x kernel {k}, shape {shapes}")
        args = [state.const("pool_kernel", *k)]
        for d in range(2, rank):
            updates[d] = Dim(f"{paren(state.dims[d].expr)} // {args[0]}", _out_label(state.dims[d].label))
    elif fam == "adaptive_pool":
        if rank != op.spatial_dims + 2:
            raise ChainError(f"{op.name} needs rank {op.spatial_dims + 2}, chain is at rank {rank}")
        if rng.random() < 0.5:
            target = "1"
        else:
            spatial = ", ".join(d.expr for d in state.dims[2:])
            target = state.derived("pooled_size", f"max(1, min(({spatial},)) // 2)")
        args = [target]
        for d in range(2, rank):
            updates[d] = Dim(target, "pooled_size")
    elif fam == "flatten":
        if rank < 3:
            raise ChainError(f"{op.name}: flattening needs rank >= 3, chain is at rank {rank}")
        flat = Dim(" * ".join(paren(d.expr) for d in state.dims[1:]), "flat_features")
        state.dims = [state.dims[0], flat]
    elif fam in ("scale_param", "bias_param"):
        base = "scale_shape" if fam == "scale_param" else "bias_shape"
        if rank >= 4 or (rank == 3 and state.dims[1].label in ("channels", "out_channels")):
            value = f"({state.ref(1)}{', 1' * (rank - 2)})"  # per channel of an [N, C, ...] layout
        else:
            value = f"({state.ref(-1)},)"  # per feature of an [N, D] / [N, S, D] layout
        param_shape = state.derived(base, value)
    else:  # pragma: no cover - Family is a closed Literal
        raise ChainError(f"unknown family {fam!r}")
    state.dims = [updates.get(i, d) for i, d in enumerate(state.dims)]
    for level, space in zip(LEVELS, (sizes, cpu)):
        out_shape = state.shape(level)
        if math.prod(out_shape) > space.max_elements:
            raise ChainError(f"{op.name}: output {out_shape} exceeds max_elements={space.max_elements} at {level} sizes")
        if min(out_shape) < 1:
            raise ChainError(f"{op.name}: output shape {out_shape} has an empty dim at {level} sizes")
    state.value_range = next_range(state.value_range, op.output_range)
    return PlannedStep(op=op, attr_name=attr, ctor_args=args, ctor_kwargs=kwargs, call_kwargs=call_kwargs,
                       param_shape=param_shape, output_shape=state.shape("full"), cpu_output_shape=state.shape("cpu"))


class ChainBuilder:
    """Grows one chain operator by operator; a step that does not fit leaves the chain unchanged."""

    def __init__(self, first: OperatorSpec, rng: random.Random, sizes: SizeSpace, rank: int | None = None,
                 cpu_sizes: SizeSpace | None = None) -> None:
        ranks = [r for r in first.ranks if r in (2, 3, 4)]
        if rank is None:
            if not ranks:
                raise ChainError(f"{first.name} takes ranks {first.ranks}; composed inputs have rank 2, 3 or 4")
            rank = rng.choice(ranks)
        self.rng, self.sizes = rng, sizes
        self.cpu_sizes = cpu_sizes if cpu_sizes is not None else default_cpu_sizes()
        self.state = ChainState(value_range="positive" if first.domain == "nonneg" else first.domain)
        _start_dims(rank, first, rng, sizes, self.cpu_sizes, self.state)
        self.generator = generator_for_domain(first.domain, first.dtypes[0])
        self.input_symbols = [self.state.ref(i) for i in range(rank)]
        self.input_shape = self.state.shape("full")
        self.cpu_input_shape = self.state.shape("cpu")
        self.add(first)

    @property
    def ops(self) -> list[OperatorSpec]:
        """Operators chained so far."""
        return [s.op for s in self.state.steps]

    def fits(self, op: OperatorSpec) -> bool:
        """Cheap pre-check: rank and value domain."""
        return len(self.state.dims) in op.ranks and range_satisfies(self.state.value_range, op.domain)

    def add(self, op: OperatorSpec) -> None:
        """Append ``op``; raises :class:`ChainError` (state unchanged) when it does not fit."""
        st = self.state
        saved = st.snapshot()
        try:
            st.steps.append(_apply(op, st, self.rng, self.sizes, self.cpu_sizes, len(st.steps)))
        except ChainError:
            st.restore(saved)
            raise

    def plan(self) -> TaskPlan:
        """The chain as a :class:`TaskPlan`."""
        return TaskPlan(constants=dict(self.state.constants), cpu_constants=dict(self.state.cpu_constants),
                        input_symbols=self.input_symbols, input_shape=self.input_shape,
                        cpu_input_shape=self.cpu_input_shape, generator=self.generator, steps=list(self.state.steps))


def plan_fixed_chain(ops: Sequence[OperatorSpec], rng: random.Random, sizes: SizeSpace, rank: int | None = None,
                     cpu_sizes: SizeSpace | None = None) -> TaskPlan:
    """Plan exactly ``ops`` in order; raises :class:`ChainError` if one does not fit (at full or CPU sizes)."""
    if not ops:
        raise ChainError("a chain needs at least one operator")
    builder = ChainBuilder(ops[0], rng, sizes, rank, cpu_sizes)
    for op in ops[1:]:
        builder.add(op)
    return builder.plan()


class ComposeSettings(BaseModel):
    """Settings of the rule-based composer."""

    model_config = ConfigDict(extra="forbid")

    min_ops: int = Field(1, ge=1, le=5, description="Fewest operators per task.")
    max_ops: int = Field(5, ge=1, le=5, description="Most operators per task (paper: up to 5).")
    op_count_weights: dict[int, float] = Field(
        default_factory=lambda: {1: 1.0, 2: 2.0, 3: 3.0, 4: 2.0, 5: 1.5},
        description="Relative weight of each chain length (keys outside [min_ops, max_ops] are ignored).",
    )
    family_weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_FAMILY_WEIGHTS), description="Relative weight of each operator family when picking the next operator.")
    max_heavy_ops: int = Field(2, ge=0, description="Most Linear/Conv operators per task.")
    include_stochastic: bool = Field(False, description="Allow stochastic operators (the deterministic filter drops such tasks).")
    include_transformers: bool = Field(True, description="Allow operators imported from transformers.")
    sizes: SizeSpace = Field(default_factory=SizeSpace, description="Sizes tasks draw from.")
    cpu_sizes: SizeSpace = Field(
        default_factory=default_cpu_sizes,
        description="The CPU backend's sizes (each task's CPU_SIZES): every drawn size maps to the value at the same relative position of these lists, capped at the full size; shape rules must hold at both.",
    )
    attempts: int = Field(30, ge=1, description="Retries per candidate when a drawn chain does not fit.")


class ComposedTask(BaseModel):
    """A composed task before filtering."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id 'synth/s<seed>-<index>'.")
    code: str = Field(description="KernelBench-format module source.")
    ops: list[str] = Field(description="Operator names in order.")
    shapes: dict[str, list[int]] = Field(description="'input' and 'output' shapes (full sizes); 'cpu_input' and 'cpu_output' at CPU_SIZES.")
    dtypes: list[str] = Field(description="Input dtypes.")
    stochastic: bool = Field(False, description="An operator is stochastic.")
    requires: list[str] = Field(default_factory=list, description="Distributions the module imports beyond torch.")
    provenance: dict[str, object] = Field(default_factory=dict, description="seed, index, composer, versions.")


def task_from_plan(plan: TaskPlan, task_id: str, provenance: dict[str, object]) -> ComposedTask:
    """Render ``plan`` and wrap it with its record fields."""
    return ComposedTask(
        id=task_id,
        code=render_task(plan),
        ops=plan.ops,
        shapes={"input": plan.input_shape, "output": plan.output_shape,
                "cpu_input": plan.cpu_input_shape, "cpu_output": plan.cpu_output_shape},
        dtypes=[plan.generator.dtype],
        stochastic=any(s.op.stochastic for s in plan.steps),
        requires=sorted({r for s in plan.steps for r in s.op.requires}),
        provenance=provenance,
    )


class RuleComposer:
    """Draws operator chains from a catalog; candidate ``index`` depends only on (seed, index)."""

    name = "rules"

    def __init__(self, catalog: Sequence[OperatorSpec], settings: ComposeSettings | None = None, seed: int = 0) -> None:
        self.settings = settings or ComposeSettings()
        self.seed = seed
        s = self.settings
        ops = [op for op in sorted(catalog, key=lambda o: o.name)
               if (s.include_stochastic or not op.stochastic) and (s.include_transformers or not op.requires)
               and s.family_weights.get(op.family, 0) > 0]
        if not ops:
            raise ValueError("the operator catalog offers no usable operator for these compose settings")
        self.by_family: dict[str, list[OperatorSpec]] = {}
        for op in ops:
            self.by_family.setdefault(op.family, []).append(op)

    def _pick(self, rng: random.Random, state: ChainState | None, previous: list[OperatorSpec], heavy: int) -> OperatorSpec | None:
        s = self.settings
        fams = [f for f in sorted(self.by_family) if not (f in HEAVY_FAMILIES and heavy >= s.max_heavy_ops)]
        weights = [s.family_weights.get(f, 0.0) for f in fams]
        for _ in range(12):
            if not fams or sum(weights) <= 0:
                return None
            fam = rng.choices(fams, weights)[0]
            choices = [op for op in self.by_family[fam] if not previous or op.name != previous[-1].name]
            if state is not None:
                choices = [op for op in choices if len(state.dims) in op.ranks and range_satisfies(state.value_range, op.domain)]
            if choices:
                return rng.choice(choices)
        return None

    def compose(self, index: int) -> ComposedTask:
        """Candidate ``index``: a fitting chain of ``min_ops..max_ops`` operators."""
        s = self.settings
        rng = random.Random(f"{self.seed}:{index}")
        lengths = [n for n in range(s.min_ops, s.max_ops + 1)]
        target = rng.choices(lengths, [s.op_count_weights.get(n, 1.0) for n in lengths])[0]
        best: TaskPlan | None = None
        for _ in range(s.attempts):
            plan = self._draw(rng, target)
            if plan is not None and (best is None or len(plan.steps) > len(best.steps)):
                best = plan
            if best is not None and len(best.steps) >= target:
                break
        if best is None:
            raise ChainError(f"candidate {index}: no fitting chain found in {s.attempts} attempts")
        prov = {"seed": self.seed, "index": index, "composer": self.name, "target_ops": target}
        return task_from_plan(best, f"synth/s{self.seed}-{index:05d}", prov)

    def _draw(self, rng: random.Random, target: int) -> TaskPlan | None:
        first = self._pick(rng, None, [], 0)
        if first is None:
            return None
        try:
            builder = ChainBuilder(first, rng, self.settings.sizes, cpu_sizes=self.settings.cpu_sizes)
        except ChainError:
            return None
        failures = 0
        while len(builder.ops) < target and failures < 8:
            heavy = sum(op.family in HEAVY_FAMILIES for op in builder.ops)
            op = self._pick(rng, builder.state, builder.ops, heavy)
            if op is None:
                break
            try:
                builder.add(op)
            except ChainError:
                failures += 1
        return builder.plan()
