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
import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any, Literal

from cuda_agent.errors import CudaAgentError
from cuda_agent.harness._probe_server import probe_command, served_probe
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


class TaskProbeError(CudaAgentError):
    """A task file could not be loaded: missing definitions, an exception, a timeout.

    ``kind`` is one of: ``syntax_error``, ``import_error``, ``missing_definition``,
    ``init_inputs_error``, ``model_error``, ``inputs_error``, ``forward_error``,
    ``timeout``, ``crash``, ``bad_cpu_sizes``, ``too_large`` (one input set does not fit in memory).
    """

    def __init__(self, kind: str, message: str, source: str = "") -> None:
        where = f" ({source})" if source else ""
        super().__init__(f"bad task{where}: [{kind}] {message}")
        self.kind = kind
        #: Figures behind the failure (``too_large``: ``needed_bytes``, ``available_bytes``, ``device``).
        self.details: dict[str, Any] = {}


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


# --------------------------------------------------------------------------- probe
def _probe_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def run_probe(
    code: str,
    *,
    device: str = "cpu",
    seed: int = 0,
    timeout_s: float = 120.0,
    startup_timeout_s: float = 180.0,
    isolation: Literal["auto", "bwrap", "process"] = "auto",
    source: str = "",
    memory_limit_bytes: int | None = None,
) -> dict[str, Any]:
    """Run the task module once in a sandboxed subprocess; return the child's facts.

    ``memory_limit_bytes`` (default: :func:`probe_memory_limit` of the device): the child sizes the task on the meta
    device first and refuses to run it for real when one input set, its outputs and the parameters would not fit
    (kind ``too_large``, naming both figures) instead of dying of it.

    ``timeout_s`` counts from the moment torch is imported in the child (so a
    slow interpreter start does not eat the task's budget). A warm probe server
    (:mod:`~cuda_agent.harness._probe_server`: torch imported once, a forked
    child per task, the same sandbox) answers when it can; otherwise a fresh
    process runs the task.
    """
    limit = memory_limit_bytes if memory_limit_bytes is not None else probe_memory_limit(device)
    extra = {"memory_limit_bytes": limit} if limit else {}
    answer = served_probe(code, device=device, seed=seed, timeout_s=timeout_s, startup_timeout_s=startup_timeout_s,
                          isolation=isolation, extra=extra)
    facts, stderr_tail = answer or _one_shot_probe(code, device, seed, timeout_s, startup_timeout_s, isolation, source,
                                                   extra)
    if facts.get("ok"):
        return facts
    kind = facts.get("kind", "error")
    if kind == "too_large":
        error = TaskProbeError(kind, facts.get("message", "the task does not fit in memory"), source)
        error.details = {k: facts[k] for k in ("needed_bytes", "available_bytes", "device") if k in facts}
        raise error
    if kind == "timeout":
        raise TaskProbeError("timeout", f"running the task (import, Model(*get_init_inputs()), get_inputs(), "
                             f"forward: {timeout_s:.0f} s) took longer than the limit", source)
    if kind == "crash" and "message" not in facts:
        raise TaskProbeError("crash", f"the task process died (exit code {facts.get('exit_code')}) without a "
                             f"result: {stderr_tail}", source)
    raise TaskProbeError(kind, facts.get("message", "unknown failure"), source)


def probe_memory_limit(device: str) -> int | None:
    """Bytes a probe may allocate on ``device``: a share of the memory free now (see
    :mod:`~cuda_agent.harness.memory_budget`), or None when it cannot be read."""
    from cuda_agent.harness.memory_budget import USABLE_SHARE, measure_free_bytes

    kind, _, index = device.partition(":")
    try:
        return int(USABLE_SHARE * measure_free_bytes("cuda" if kind == "cuda" else "cpu", int(index or 0)))
    except Exception:  # noqa: BLE001 - no NVML here: the probe runs unguarded, as before
        return None


def _one_shot_probe(
    code: str, device: str, seed: int, timeout_s: float, startup_timeout_s: float, isolation: str, source: str,
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str]:
    """(answer, stderr tail) of the task run in a fresh sandboxed process (answers as a probe server's)."""
    proc = subprocess.Popen(
        probe_command(isolation, device.startswith("cuda")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    stderr_chunks: list[str] = []

    def pump_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if sum(map(len, stderr_chunks)) < 20000:
                stderr_chunks.append(line)

    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=pump_err, daemon=True).start()
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({**(extra or {}), "code": code, "device": device, "seed": seed}))
    proc.stdin.close()

    def next_line(seconds: float) -> str | None:
        try:
            return lines.get(timeout=seconds)
        except queue.Empty:
            proc.kill()
            proc.wait()
            raise TimeoutError from None

    try:
        try:
            first = next_line(startup_timeout_s)
        except TimeoutError:
            raise TaskProbeError("timeout", f"starting the probe (import torch, {startup_timeout_s:.0f} s) took "
                                 "longer than the limit", source) from None
        if first is None or first.strip() != "READY":
            proc.wait()
            raise TaskProbeError("crash", f"the probe process died at start: {''.join(stderr_chunks)[-2000:]}", source)
        try:
            result = next_line(timeout_s)
        except TimeoutError:
            return {"ok": False, "kind": "timeout"}, ""
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if result is None:
        return {"ok": False, "kind": "crash", "exit_code": proc.returncode}, "".join(stderr_chunks)[-2000:]
    return json.loads(result), ""


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
        meta={"probe_device": facts["device"], "probe_torch": facts["torch"], **(meta or {})},
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
