"""Loading KernelBench-format tasks into a :class:`~cuda_agent.schemas.task.TaskManifest`.

A task is a Python module with ``class Model(nn.Module)``, ``get_inputs()``,
``get_init_inputs()`` and module-level sizes. :func:`load_task_file` /
:func:`load_task_code` run it once in a sandboxed subprocess (bubblewrap
when usable: read-only root, no network, private /tmp) and record: input and
output shapes/dtypes, each input's value domain, ``init_inputs``, FLOPs of
one forward (``torch.utils.flop_counter.FlopCounterMode``), the minimum
bytes moved, and whether the reference is stochastic. Bad tasks raise
:class:`TaskProbeError` saying what is wrong.

Value domains: the family comes from the generator in ``get_inputs``'s
source (``torch.randn`` -> normal, ``torch.rand`` -> uniform, ``randint`` ->
integer, ``ones``/``zeros``/``full`` -> constant) and the sampled range is
recorded. The *valid* range is only set when the operator needs it
(``forward`` calls log/sqrt/... and the task's own inputs are non-negative
-> ``low=0``), or when the task declares it explicitly::

    INPUT_DOMAINS = {0: {"low": 0.0}}          # input index -> InputDomain fields

CPU-sized variants: a task may define ``CPU_SIZES = {"batch_size": 16, ...}``
listing every module-level size to override (derived sizes too) for the CPU
backend. :func:`apply_cpu_sizes` appends ``globals().update(CPU_SIZES)`` to
the code (visible in ``model.py``), and :func:`scaled_for_backend` gives the
re-probed manifest the CPU backend uses.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Literal

from cuda_agent.harness.task_probe import TaskProbeError, _probe_device, probe_memory_limit, run_probe

__all__ = ["CPU_SIZES_MARKER", "TaskProbeError", "apply_cpu_sizes", "has_cpu_sizes", "infer_domain", "load_task_code",
           "load_task_file", "manifest_from_facts", "probe_memory_limit", "run_probe", "scaled_for_backend"]
from cuda_agent.schemas.task import InputDomain, TaskManifest, TensorSpec, code_hash

#: Marker line appended by :func:`apply_cpu_sizes`.
CPU_SIZES_MARKER = "# --- cuda-agent: CPU_SIZES applied for the cpu backend ---"
#: Calls in forward() whose operator needs non-negative inputs.
_NONNEGATIVE_OPS = {"log", "log2", "log10", "sqrt", "rsqrt", "lgamma", "digamma"}
#: Calls whose operator needs inputs in [-1, 1].
_UNIT_OPS = {"acos", "asin", "atanh", "arccos", "arcsin", "arctanh"}
#: Generator call -> domain kind.
_GENERATORS = {
    "randn": "normal",
    "randn_like": "normal",
    "normal": "normal",
    "rand": "uniform",
    "rand_like": "uniform",
    "uniform_": "uniform",
    "randint": "integer",
    "randint_like": "integer",
    "randperm": "index",
    "arange": "index",
    "ones": "constant",
    "zeros": "constant",
    "full": "constant",
    "ones_like": "constant",
    "zeros_like": "constant",
    "full_like": "constant",
}


# --------------------------------------------------------------------------- CPU sizes
def _module_level_names(tree: ast.Module) -> dict[str, ast.expr]:
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node.value
                elif isinstance(target, ast.Tuple):  # depth, height, width = 16, 32, 32
                    names.update({t.id: node.value for t in target.elts if isinstance(t, ast.Name)})
    return names


def has_cpu_sizes(code: str) -> bool:
    """Whether the task defines a module-level ``CPU_SIZES`` dict."""
    try:
        return "CPU_SIZES" in _module_level_names(ast.parse(code))
    except SyntaxError:
        return False


def apply_cpu_sizes(code: str, source: str = "") -> str:
    """The task code with its ``CPU_SIZES`` applied (appended ``globals().update``).

    :raises TaskProbeError: ``CPU_SIZES`` is absent, not a dict literal, or
        names a size the module does not define.
    """
    if CPU_SIZES_MARKER in code:
        return code
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise TaskProbeError("syntax_error", f"line {exc.lineno}: {exc.msg}", source) from exc
    names = _module_level_names(tree)
    node = names.get("CPU_SIZES")
    if not isinstance(node, ast.Dict):
        raise TaskProbeError(
            "bad_cpu_sizes", "the task has no module-level CPU_SIZES = {'size_name': value, ...} dict literal", source
        )
    for key in node.keys:
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise TaskProbeError("bad_cpu_sizes", "CPU_SIZES keys must be string literals", source)
        if key.value not in names:
            valid = ", ".join(n for n in names if n != "CPU_SIZES")
            raise TaskProbeError(
                "bad_cpu_sizes", f"CPU_SIZES names {key.value!r}, which is not a module-level name; valid: {valid}", source
            )
    return code.rstrip("\n") + f"\n\n{CPU_SIZES_MARKER}\nglobals().update(CPU_SIZES)\n"


# --------------------------------------------------------------------------- domains
def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr
        if isinstance(func, ast.Name):
            return func.id
    return None


def _generator_of(expr: ast.AST, assigned: dict[str, ast.AST], depth: int = 0) -> tuple[str | None, bool]:
    """(domain kind, made non-negative by abs/relu/exp...) of the expression building one input."""
    if depth > 8:
        return None, False
    nonneg = False
    for node in ast.walk(expr):
        name = _call_name(node)
        if name in {"abs", "relu", "exp", "square", "sigmoid", "softmax"}:
            nonneg = True
        if name in _GENERATORS:
            return _GENERATORS[name], nonneg
        if isinstance(node, ast.Name) and node.id in assigned and node is not expr:
            kind, nn = _generator_of(assigned[node.id], assigned, depth + 1)
            if kind:
                return kind, nonneg or nn
    if isinstance(expr, ast.Name) and expr.id in assigned:
        return _generator_of(assigned[expr.id], assigned, depth + 1)
    return None, nonneg


def _input_generators(tree: ast.Module) -> list[tuple[str | None, bool]]:
    """Per returned input of get_inputs(): (generator kind, non-negative)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            assigned: dict[str, ast.AST] = {}
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            assigned[target.id] = stmt.value
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.Return) and isinstance(stmt.value, (ast.List, ast.Tuple)):
                    return [_generator_of(e, assigned) for e in stmt.value.elts]
    return []


def _forward_calls(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return {n for n in (_call_name(c) for c in ast.walk(node)) if n}
    return set()


def _declared_domains(tree: ast.Module) -> dict[int, dict[str, Any]]:
    node = _module_level_names(tree).get("INPUT_DOMAINS")
    if node is None:
        return {}
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return {}
    return {int(k): dict(v) for k, v in value.items()} if isinstance(value, dict) else {}


def infer_domain(info: dict[str, Any], generator: str | None, nonneg_expr: bool, forward_calls: set[str]) -> InputDomain:
    """The :class:`InputDomain` of one probed input (see module doc for the rules)."""
    lo, hi = info.get("min"), info.get("max")
    dtype = info.get("dtype") or ""
    if dtype == "bool":
        return InputDomain(kind="bool", low=0, high=1)
    kind = generator
    if kind is None:
        kind = "integer" if dtype.startswith(("int", "uint")) else "unknown"
    low = high = None
    if kind in {"integer", "index", "constant"}:
        low, high = lo, hi
    elif lo is not None:
        if forward_calls & _UNIT_OPS and lo >= -1 and hi is not None and hi <= 1:
            low, high = -1.0, 1.0
        elif (forward_calls & _NONNEGATIVE_OPS or nonneg_expr) and lo >= 0:
            low = 0.0
    return InputDomain(kind=kind, low=low, high=high, sampled_low=lo, sampled_high=hi)


def manifest_from_facts(
    code: str, facts: dict[str, Any], *, id: str, source: str = "", level: int | None = None, meta: dict | None = None
) -> TaskManifest:
    """Build the manifest from the probe's facts and the code's AST."""
    tree = ast.parse(code)
    generators = _input_generators(tree)
    calls = _forward_calls(tree)
    declared = _declared_domains(tree)
    inputs = []
    for i, info in enumerate(facts["inputs"]):
        gen, nonneg = generators[i] if i < len(generators) else (None, False)
        spec = TensorSpec(name=info["name"], kind=info["kind"], shape=info.get("shape", []), dtype=info.get("dtype"))
        if info["kind"] == "tensor":
            domain = infer_domain(info, gen, nonneg, calls)
            if i in declared:
                domain = domain.model_copy(update=declared[i])
            spec.domain = domain
        else:
            spec.value = info.get("value")
        inputs.append(spec)
    outputs = [
        TensorSpec(name=o["name"], kind="tensor", shape=o["shape"], dtype=o["dtype"]) for o in facts["outputs"]
    ]
    bytes_moved = float(
        sum(i.get("nbytes", 0) for i in facts["inputs"]) + sum(o.get("nbytes", 0) for o in facts["outputs"])
        + facts.get("param_bytes", 0)
    )
    float_dtypes = [o.dtype for o in outputs if o.dtype and o.dtype.startswith(("float", "bfloat"))]
    precision: dict[str, Any] = {"compute_dtype": float_dtypes[0]} if float_dtypes else {}
    return TaskManifest.from_code(
        id,
        code,
        source=source,
        level=level,
        inputs=inputs,
        outputs=outputs,
        init_inputs=facts["init_inputs"],
        flops=facts["flops"],
        bytes_moved=bytes_moved,
        stochastic=facts["stochastic"],
        precision=precision,
        meta={"probe_device": facts["device"], "probe_torch": facts["torch"],
              **({"work_bytes": int(facts["work_bytes"])} if facts.get("work_bytes") is not None else {}),
              **(meta or {})},
    )


def load_task_code(
    code: str,
    id: str,
    source: str = "",
    level: int | None = None,
    *,
    sizes: Literal["full", "cpu"] = "full",
    device: str = "auto",
    timeout_s: float = 120.0,
    isolation: Literal["auto", "bwrap", "process"] = "auto",
) -> TaskManifest:
    """Probe task ``code`` and return its manifest.

    :param sizes: ``"cpu"`` applies the task's ``CPU_SIZES`` first (see module doc).
    :param device: where the probe runs the task: ``cpu``, ``cuda``, or ``auto``
        (cuda when visible); full-size tasks are meant for the GPU.
    :raises TaskProbeError: the task is bad; the message says why.
    """
    try:
        ast.parse(code)
    except SyntaxError as exc:
        raise TaskProbeError("syntax_error", f"line {exc.lineno}: {exc.msg}", source or id) from exc
    meta: dict[str, Any] = {}
    if sizes == "cpu":
        code = apply_cpu_sizes(code, source or id)
        meta["sizes"] = "cpu"
        device = "cpu"
    facts = run_probe(code, device=_probe_device(device), timeout_s=timeout_s, isolation=isolation, source=source or id)
    return manifest_from_facts(code, facts, id=id, source=source, level=level, meta=meta)


def load_task_file(
    path: str | Path,
    id: str | None = None,
    level: int | None = None,
    *,
    sizes: Literal["full", "cpu"] = "full",
    device: str = "auto",
    timeout_s: float = 120.0,
    isolation: Literal["auto", "bwrap", "process"] = "auto",
) -> TaskManifest:
    """Probe the task file at ``path``; ``id`` defaults to ``tasks/<stem>``.

    :raises TaskProbeError: the file is missing or the task is bad.
    """
    path = Path(path)
    if not path.is_file():
        raise TaskProbeError("missing_file", f"task file {path} does not exist", str(path))
    return load_task_code(
        path.read_text(),
        id or f"tasks/{path.stem}",
        source=str(path),
        level=level,
        sizes=sizes,
        device=device,
        timeout_s=timeout_s,
        isolation=isolation,
    )


_SCALED: dict[str, TaskManifest] = {}


def scaled_for_backend(task: TaskManifest, kind: str) -> TaskManifest:
    """The manifest a backend evaluates: for ``cpu``, the task's ``CPU_SIZES`` variant.

    Tasks without ``CPU_SIZES`` and already-scaled tasks come back unchanged;
    other backends get ``task`` itself. Results are cached per code hash.
    """
    if kind != "cpu" or CPU_SIZES_MARKER in task.code or not has_cpu_sizes(task.code):
        return task
    key = task.code_hash
    if key not in _SCALED:
        _SCALED[key] = load_task_code(task.code, task.id, source=task.source, level=task.level, sizes="cpu")
        _SCALED[key].meta.setdefault("full_code_hash", code_hash(task.code))
    return _SCALED[key]
