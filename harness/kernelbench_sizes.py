"""Reduced sizes for KernelBench problems: the same operators at sizes a CPU (or a quick check) can run.

KernelBench's level-1 problems hold 4-16 GiB per input set; the CPU backend and CI cannot run them. An
explicit option (``kernelbench:PATH?sizes=reduced``) rewrites each problem through the CPU-size mechanism
the data pipeline already uses (``CPU_SIZES`` + :func:`cuda_agent.harness.tasks.apply_cpu_sizes`):

- a module-level integer (or list/tuple of integers) is a **size** when ``get_inputs()`` or
  ``get_init_inputs()`` reaches it (directly or through other constants) and it is larger than
  :data:`SMALL`; sizes are divided by one power of two per problem, chosen so the largest becomes at
  most :data:`TARGET`, never below ``min(value, SMALL)``, keeping the value's factors of 16 and of the
  group and head counts (a multiple of ``gcd(value, lcm(16, groups...))``); group counts above :data:`SMALL`
  are divided with the sizes they split, so a group keeps about its full-size width;
- constants that shape the operator rather than the data are **not scalable** and keep their value,
  each with its reason: names of kernel sizes, strides, paddings, dilations, groups, heads, layers,
  pools, patches, axes (``dim = 1``), eps/slopes/scales, and every value at most :data:`SMALL`
  (reduction axes, channel counts of 3, kernel sizes);
- every module-level constant computed from scaled ones (``bias_shape = (out_channels, 1, 1)``,
  ``N = 2048 * 2``) is recomputed, so ``CPU_SIZES`` lists the derived values too, as the mechanism asks.

Results at reduced sizes are not comparable to published KernelBench numbers: the manifest says so
(``meta['sizes'] = 'reduced'``, ``meta['comparable_to_published'] = False``) and ``score`` flags each row.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.harness.tasks import apply_cpu_sizes

#: Largest size after reduction (the largest scalable constant is divided down to at most this).
TARGET = 128
#: Values at most this are never scaled (axes, small channel counts, kernel sizes); sizes never go below it.
SMALL = 8
#: Names of constants that shape the operator, not the data (kept whatever their value).
STRUCTURAL_NAME = re.compile(
    r"kernel|stride|pad|dilation|pool|patch|group|head|eps|slope|scale|factor|multiplier|divisor|momentum|dropout|"
    r"pdrop|value|min|max|clamp|bias$|cluster|d_state|block_len|num_classes|^num_layers$|^layers$|axis|"
    r"(?-i:^[pk]$)",  # p (a norm's order, a dropout rate) and k (top-k) in lower case; K is a matmul size
    re.IGNORECASE,
)
#: Names that are data sizes even when they contain a structural word (``layer_sizes``, ``hidden_layer_sizes``).
SIZE_NAME = re.compile(r"(^|_)(sizes?|features|channels|dim\d*|len|length|width|height|depth|seq\w*)$", re.IGNORECASE)
#: Input resolutions: kept for whole networks (level 3), whose strides, pools, patches and windows fix them.
SPATIAL_NAME = re.compile(r"^(height|width|image_size|img_size|resolution|input_resolution|[HW])$", re.IGNORECASE)
#: Elements of the largest input tensor after reduction, at most (when the sizes allow).
BUDGET = 1 << 20
MARKER = "# --- cuda-agent: reduced KernelBench sizes (not comparable to published numbers) ---"


@dataclass
class SizePlan:
    """What the reduction does to one problem: the scaled sizes, the derived values, what stays and why."""

    factor: int = 1
    scaled: dict[str, Any] = field(default_factory=dict)  # base sizes: name -> reduced value
    cpu_sizes: dict[str, Any] = field(default_factory=dict)  # every changed module-level name (derived too)
    not_scalable: dict[str, str] = field(default_factory=dict)  # name -> reason kept
    unresolved: list[str] = field(default_factory=list)  # constants the evaluator could not recompute


class _Unknown(Exception):
    pass


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    """A literal expression over earlier constants: numbers, names, tuples/lists, + - * // / % **, unary -."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)) or (
            isinstance(node, ast.Constant) and node.value is None):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_eval(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.FloorDiv: lambda: a // b,
               ast.Div: lambda: a / b, ast.Mod: lambda: a % b, ast.Pow: lambda: a**b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
    raise _Unknown(ast.unparse(node)[:40])


def _assignments(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    """(name, value) of module-level assignments, ``a, b = 1, 2`` split into its parts."""
    out: list[tuple[str, ast.expr]] = []
    for n in tree.body:
        if not isinstance(n, ast.Assign):
            continue
        target = n.targets[0]
        if all(isinstance(t, ast.Name) for t in n.targets):
            out += [(t.id, n.value) for t in n.targets]  # type: ignore[attr-defined]  # a = b = 256
        elif (isinstance(target, ast.Tuple) and isinstance(n.value, ast.Tuple) and len(target.elts) == len(n.value.elts)
              and all(isinstance(t, ast.Name) for t in target.elts)):
            out += [(t.id, v) for t, v in zip(target.elts, n.value.elts, strict=True)]  # type: ignore[attr-defined]
    return out


def _names_reached(tree: ast.Module, assigned: dict[str, ast.expr]) -> set[str]:
    """Module-level names that get_inputs()/get_init_inputs() read, through other constants too."""
    roots: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("get_inputs", "get_init_inputs"):
            roots |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    reached, todo = set(), [r for r in roots if r in assigned]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += [n.id for n in ast.walk(assigned[name]) if isinstance(n, ast.Name) and n.id in assigned]
    return reached


def _is_size(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > SMALL
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value) and any(v > SMALL for v in value)


def _scale(value: Any, factor: int) -> Any:
    if isinstance(value, int):
        return value if value <= SMALL else max(value // factor, SMALL)
    scaled = [_scale(v, factor) for v in value]
    return tuple(scaled) if isinstance(value, tuple) else scaled


def _keep_factors(full: Any, reduced: Any, unit: int) -> Any:
    """``reduced`` rounded down to a multiple of ``gcd(full, unit)`` (at least that, at most ``full``)."""
    if isinstance(full, int):
        if full <= SMALL:
            return full
        m = math.gcd(full, unit)
        return min(full, max(m, reduced // m * m))
    items = [_keep_factors(f, r, unit) for f, r in zip(full, reduced, strict=True)]
    return tuple(items) if isinstance(full, tuple) else items


def plan_reduction(code: str, *, target: int = TARGET, keep_spatial: bool = False) -> SizePlan:
    """The reduction of one problem's module-level sizes (see the module doc); ``keep_spatial`` keeps input
    resolutions (``height``, ``width``, ``image_size`` ...), as whole networks (level 3) need."""
    tree = ast.parse(code)
    pairs = _assignments(tree)
    assigned = dict(pairs)
    reached = _names_reached(tree, assigned)
    env: dict[str, Any] = {}
    plan = SizePlan()
    literal_bases: dict[str, Any] = {}
    for name, node in pairs:
        try:
            env[name] = _eval(node, env)
        except (_Unknown, ArithmeticError, TypeError):
            continue
        depends = any(isinstance(n, ast.Name) for n in ast.walk(node))
        if depends or not isinstance(env[name], (int, list, tuple)) or isinstance(env[name], bool):
            continue
        if name not in reached:
            plan.not_scalable[name] = "not read by get_inputs/get_init_inputs (e.g. an axis used in forward)"
            continue
        if STRUCTURAL_NAME.search(name) and not (SIZE_NAME.search(name) and not re.search(
                r"kernel|stride|pad|dilation|pool|patch", name, re.IGNORECASE)):
            plan.not_scalable[name] = "shapes the operator (kernel, stride, padding, groups, heads, axis, ...)"
        elif keep_spatial and SPATIAL_NAME.search(name):
            plan.not_scalable[name] = "input resolution of a whole network (its strides, pools and patches fix it)"
        elif not _is_size(env[name]):
            plan.not_scalable[name] = f"at most {SMALL} (an axis, a small channel count or kernel size)"
        else:
            literal_bases[name] = env[name]
    if not literal_bases:
        return plan
    plan.factor = _choose_factor(tree, pairs, literal_bases, target)
    if plan.factor == 1:
        return plan
    plan.scaled = {name: _scale(value, plan.factor) for name, value in literal_bases.items()}
    _scale_group_counts(plan, env)
    # A size keeps the small factors a model may rely on: its own share of lcm(16, group and head counts)
    # (GroupNorm's groups, heads dividing the embedding, ShuffleNet's channels % 4 and mid_channels % groups).
    divisors = [plan.scaled.get(n, env[n]) for n in (*plan.not_scalable, *plan.scaled)
                if re.search(r"group|head", n, re.IGNORECASE)
                and isinstance(env.get(n), int) and not isinstance(env[n], bool) and env[n] > 1]
    unit = math.lcm(16, *divisors)
    plan.scaled = {name: _keep_factors(literal_bases[name], value, unit) if name in literal_bases else value
                   for name, value in plan.scaled.items()}
    reduced_env = _environment(pairs, plan.scaled, plan.unresolved)
    plan.cpu_sizes = {name: value for name, value in reduced_env.items()
                      if name in env and value != env[name] and not isinstance(value, str)}
    return plan


def _scale_group_counts(plan: SizePlan, env: dict[str, Any]) -> None:
    """Group counts above :data:`SMALL` are divided with the sizes they split (by the largest power of two up to the
    plan's factor that divides them, down to 1), so a group keeps about its full-size number of channels or features.
    Kept whole, a GEMM's GroupNorm at reduced size had one feature per group (level2/37: 64 groups of 4096 features
    became 64 groups of 64, level2/62: 512 of 512): its output was float32 rounding noise, not GroupNorm."""
    for name in [n for n in plan.not_scalable if re.search(r"group", n, re.IGNORECASE)]:
        value = env.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= SMALL:
            continue
        divisor = 1
        while divisor * 2 <= plan.factor and value % (divisor * 2) == 0:
            divisor *= 2
        if divisor > 1:
            plan.scaled[name] = value // divisor
            del plan.not_scalable[name]


def _environment(pairs: list[tuple[str, ast.expr]], scaled: dict[str, Any], unresolved: list[str] | None = None
                 ) -> dict[str, Any]:
    """Module-level constants with ``scaled`` substituted and everything derived from them recomputed."""
    env: dict[str, Any] = {}
    for name, node in pairs:
        if name in scaled:
            env[name] = scaled[name]
            continue
        try:
            env[name] = _eval(node, env)
        except (_Unknown, ArithmeticError, TypeError):
            if unresolved is not None and any(isinstance(n, ast.Name) and n.id in scaled for n in ast.walk(node)):
                unresolved.append(name)
    return env


_CREATORS = {"rand", "randn", "randint", "zeros", "ones", "empty", "full", "normal", "rand_like", "randn_like"}


def _input_elements(tree: ast.Module, env: dict[str, Any]) -> int:
    """Elements of the largest tensor ``get_inputs()`` creates with literal shapes (0 when none can be read)."""
    largest = 0
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == "get_inputs"):
            continue
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            if name not in _CREATORS:
                continue
            args = call.args[2:] if name == "randint" else call.args
            args = args + [k.value for k in call.keywords if k.arg == "size"]
            dims: list[int] = []
            try:
                for a in args:
                    value = _eval(a.value if isinstance(a, ast.Starred) else a, env)
                    dims += list(value) if isinstance(value, (list, tuple)) else [value]
            except (_Unknown, ArithmeticError, TypeError):
                continue
            if dims and all(isinstance(d, int) for d in dims):
                largest = max(largest, math.prod(dims))
    return largest


def _choose_factor(tree: ast.Module, pairs: list[tuple[str, ast.expr]], bases: dict[str, Any], target: int) -> int:
    """The smallest power of two bringing the largest size to ``target`` and the largest input to :data:`BUDGET`."""
    factor = 1
    while factor < 1 << 24:
        scaled = {name: _scale(value, factor) for name, value in bases.items()}
        largest = max(max(v) if isinstance(v, (list, tuple)) else v for v in scaled.values())
        elements = _input_elements(tree, _environment(pairs, scaled))
        if largest <= target and elements <= BUDGET:
            return factor
        if factor > 1 and scaled == {name: _scale(value, factor // 2) for name, value in bases.items()}:
            return factor // 2  # every size is at its floor already
        factor *= 2
    return factor


def reduced_code(code: str, source: str = "", *, target: int = TARGET, keep_spatial: bool = False
                 ) -> tuple[str, SizePlan]:
    """The problem at reduced sizes (``CPU_SIZES`` written and applied) and the plan; unchanged when nothing scales.

    A problem that already defines ``CPU_SIZES`` keeps its own.
    """
    from cuda_agent.harness.tasks import has_cpu_sizes

    if has_cpu_sizes(code):
        return apply_cpu_sizes(code, source), SizePlan()
    plan = plan_reduction(code, target=target, keep_spatial=keep_spatial)
    if not plan.cpu_sizes:
        return code, plan
    entries = ", ".join(f"{k!r}: {v!r}" for k, v in plan.cpu_sizes.items())
    written = code.rstrip("\n") + f"\n\n{MARKER}\nCPU_SIZES = {{{entries}}}\n"
    return apply_cpu_sizes(written, source), plan


def reduction_meta(plan: SizePlan) -> dict[str, Any]:
    """The manifest ``meta`` entries of a reduced problem (JSON values)."""
    return {
        "sizes": "reduced",
        "comparable_to_published": False,
        "reduced_factor": plan.factor,
        "reduced_sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in plan.cpu_sizes.items()},
        "not_scalable": dict(plan.not_scalable),
        **({"reduced_unresolved": list(plan.unresolved)} if plan.unresolved else {}),
    }
