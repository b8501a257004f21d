"""Static integrity rules for Triton ``model_new.py`` files (THREATS.md, the classes visible in the source).

A Triton solution keeps its kernels (``@triton.jit`` functions) and ``ModelNew`` in one file, the form KernelBench's
Triton backend uses. Two parts are judged differently:

- **kernel bodies** are Triton device code: they may use ``tl``/``triton.language``, their parameters, other
  kernels, module constants and a few builtins; a reference to torch is ``T1.python.torch_call``, to anything
  else ``T1.python.import_not_allowed``;
- **everything else** is judged by the harness's own ``model_new.py`` allowlist (the one every CUDA solution
  meets), after a line-preserving rewrite: each kernel definition becomes an import of an extension function of
  the same name, each launch ``k[grid](a, b)`` becomes the extension call ``k(grid, a, b)``, and ``triton``
  becomes a module of pure helpers (``from triton import cdiv`` a math function; a ``tl`` dtype passed as data, the
  number 1; ``tl.constexpr(literal)`` at module level, its literal; module-level autotune configs only decorators
  read, dropped: the decorator rules judge them). So ``ModelNew.forward`` may only launch kernels, allocate outputs, read
  metadata and do arithmetic on Python numbers, and must launch at least one kernel; every other rule (no torch
  compute, no fallbacks, no reflection, threads, files, flags, timers, task imports) applies unchanged.

Outside kernels only these parts of Triton may be used: :data:`TRITON_HELPERS` (``triton.cdiv``,
``triton.next_power_of_2``, the decorators and ``triton.Config``) and ``tl`` dtypes/``constexpr``. The runtime,
compiler, backends, testing (``do_bench``) and knobs are refused (T1/T8/T16).

What the rewrite blanks but Triton runs as Python (decorators, attribute chains in kernel bodies, kernels used
other than launched) is judged by :mod:`triton_backend.kernel_scope`.

Every rule id is one of the harness's table (``cuda_agent.harness.integrity.RULES``), so a Triton rejection names
the same threat class as a CUDA one (docs/backends.md lists what each means for Triton).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from cuda_agent.harness.integrity import Violation, check_model_new_source

from triton_backend.kernel_scope import (DecoratorCheck, grid_function, grid_meta_violations, is_dtype,
                                         is_literal, kernel_attribute_violations, kernel_value_violations,
                                         literal_constants, rebound)

#: The extension module name the rewritten file imports (the allowlist's default).
EXTENSION = "cuda_extension"
#: ``triton.<name>`` usable outside kernels.
TRITON_HELPERS = frozenset({"cdiv", "next_power_of_2", "jit", "autotune", "heuristics", "Config", "language"})
#: The helpers of :data:`TRITON_HELPERS` that compute on Python numbers (``from triton import cdiv`` binds one).
NUMBER_HELPERS = frozenset({"cdiv", "next_power_of_2"})
#: ``triton.language.<name>`` usable outside kernels (annotations, dtypes passed to kernels).
LANGUAGE_HELPERS = frozenset({"constexpr", "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32",
                              "int64", "uint8", "float8e4nv", "float8e5"})
#: Submodules of triton refused anywhere, with the rule they break.
REFUSED_PARTS = {"testing": "T8.python.timer_access", "profiler": "T8.python.timer_access",
                 "knobs": "T16.python.global_flag", "runtime": "T1.python.native_access",
                 "compiler": "T1.python.native_access", "backends": "T1.python.native_access",
                 "tools": "T1.python.native_access", "_C": "T1.python.native_access"}
#: Builtins a kernel body may name.
KERNEL_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance",
                             "True", "False", "None"})
_DECORATORS = {"jit", "autotune", "heuristics"}
#: Triton's device-function libraries a kernel may use as ``libdevice.tanh(x)``: the packages they may be imported
#: from (``from triton.language.extra import libdevice``) and the modules themselves (``import ... as libdevice``).
DEVICE_LIB_PACKAGES = frozenset({"triton.language.extra", "triton.language.extra.cuda", "triton.language.extra.hip"})
DEVICE_LIB_MODULES = frozenset(f"{p}.libdevice" for p in DEVICE_LIB_PACKAGES)


@dataclass
class TritonFile:
    """What the checker learned about one file."""

    kernels: list[str] = field(default_factory=list)
    """Names of the ``@triton.jit`` functions (their compiled kernels carry these names)."""
    violations: list[Violation] = field(default_factory=list)


def _aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Local names bound to ``triton`` and to ``triton.language``."""
    triton, language = set(), set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "triton":
                    triton.add(a.asname or "triton")
                elif a.name == "triton.language":
                    (language if a.asname else triton).add(a.asname or "triton")
        elif isinstance(node, ast.ImportFrom) and node.module == "triton" and not node.level:
            language.update(a.asname or a.name for a in node.names if a.name == "language")
    return triton, language | set(device_libs(tree))


def device_libs(tree: ast.Module) -> dict[str, str]:
    """Local names bound to a libdevice module (``from triton.language.extra import libdevice``, ``import
    triton.language.extra.cuda.libdevice as ld``), with the module's name: usable inside kernels as ``tl`` is."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and not node.level and node.module in DEVICE_LIB_PACKAGES:
            out.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names if a.name == "libdevice"})
        elif isinstance(node, ast.Import):
            out.update({a.asname: a.name for a in node.names if a.name in DEVICE_LIB_MODULES and a.asname})
    return out


def device_functions(tree: ast.Module) -> set[str]:
    """Local names bound to libdevice's device functions (``from triton.language.extra.cuda.libdevice import tanh``):
    usable inside kernels as ``libdevice.tanh`` is. Only the module's own functions (not ``core``, a module)."""
    return {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
            and not node.level and node.module in DEVICE_LIB_MODULES for a in node.names
            if _device_function(node.module, a.name)}


def _device_function(module: str, name: str) -> bool:
    import importlib

    value = getattr(importlib.import_module(module), name, None) if not name.startswith("_") else None
    return callable(value) and not isinstance(value, type) and getattr(value, "__module__", None) == module


def _device_lib_import(node: ast.Import | ast.ImportFrom) -> bool:
    """An import of a libdevice module (or of its device functions), and of nothing else."""
    if isinstance(node, ast.ImportFrom) and not node.level and node.module in DEVICE_LIB_MODULES:
        return all(_device_function(node.module, a.name) for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return not node.level and node.module in DEVICE_LIB_PACKAGES and all(a.name == "libdevice" for a in node.names)
    return all(a.name in DEVICE_LIB_MODULES and a.asname for a in node.names)


def _is_kernel(node: ast.AST, triton: set[str]) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in triton \
                and target.attr in _DECORATORS:
            return True
    return False


def kernel_names(source: str) -> list[str]:
    """Names of the ``@triton.jit`` functions of ``source`` ([] when it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    triton, _ = _aliases(tree)
    return [n.name for n in tree.body if _is_kernel(n, triton)]


def check_triton_source(source: str, filename: str = "model_new.py") -> TritonFile:
    """Every static rule over a Triton ``model_new.py`` (see the module docstring)."""
    out = TritonFile()
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        out.violations.append(Violation(rule="T1.python.no_model_new", message=f"cannot parse: {exc.msg}",
                                        file=filename, line=exc.lineno))
        return out
    triton, language = _aliases(tree)
    kernels = [n for n in tree.body if _is_kernel(n, triton)]
    out.kernels = [k.name for k in kernels]
    inside = {id(n) for k in kernels for n in ast.walk(k)}
    libs, functions = device_libs(tree), device_functions(tree)
    constants = literal_constants(tree, triton, language - set(libs))
    for k in kernels:
        out.violations += _kernel_violations(k, filename, set(out.kernels), triton | language | functions, constants)
        out.violations += _precision_violations(k, filename, language | triton)
    out.violations += _triton_use_violations(tree, filename, triton, language, inside)
    names = set(out.kernels)
    decorators = DecoratorCheck(tree, filename, triton, language, names, TRITON_HELPERS, LANGUAGE_HELPERS)
    for k in kernels:
        out.violations += decorators.check(k)
        out.violations += kernel_attribute_violations(k, filename, triton, language, names | functions, libs, constants)
    out.violations += kernel_value_violations(tree, filename, names, inside)
    out.violations += grid_meta_violations(tree, filename, inside)
    rewritten = _rewrite(source, tree, kernels, triton, language, decorator_data(tree, decorators, inside))
    found = check_model_new_source(rewritten, filename, extension_names=(EXTENSION,))
    for v in found:
        if v.rule == "T1.python.extension_unused":
            v = Violation(rule=v.rule, file=v.file, line=v.line,
                          message="ModelNew.forward launches no @triton.jit kernel (kernel[grid](...)); the kernels "
                                  "must do the work")
        out.violations.append(v)
    return out


def _kernel_violations(k: ast.FunctionDef, filename: str, kernels: set[str], triton: set[str],
                       constants: set[str]) -> list[Violation]:
    """Names a kernel body refers to: only its own, Triton's, other kernels', module constants' and builtins'."""
    local = {a.arg for a in k.args.args + k.args.kwonlyargs + k.args.posonlyargs}
    local |= {n.id for n in ast.walk(k) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    out: list[Violation] = []
    seen: set[str] = set()
    # `x_ptr: torch.Tensor`: an annotation Triton ignores (evaluated once, at definition), not a use of torch
    tensor_hints = {id(n) for a in k.args.args + k.args.kwonlyargs + k.args.posonlyargs if _torch_tensor(a.annotation)
                    for n in ast.walk(a.annotation)}  # type: ignore[arg-type]
    for node in ast.walk(k):
        if id(node) in tensor_hints or any(node is d or node in ast.walk(d) for d in k.decorator_list):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in seen:
            name = node.id
            if name in local or name in triton or name in kernels or name in constants or name in KERNEL_BUILTINS:
                continue
            seen.add(name)
            rule = "T1.python.torch_call" if name in {"torch", "F", "nn"} else "T1.python.import_not_allowed"
            out.append(Violation(rule=rule, file=filename, line=node.lineno,
                                 message=f"kernel `{k.name}` refers to `{name}`: a Triton kernel may use only tl.*, its "
                                         "parameters, other @triton.jit kernels and module constants"))
    return out


def _torch_tensor(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "Tensor" and isinstance(node.value, ast.Name) \
        and node.value.id == "torch"


def _precision_violations(k: ast.FunctionDef, filename: str, language: set[str]) -> list[Violation]:
    """``tl.dot`` must say ``input_precision="ieee"`` (Triton's default for fp32 inputs is TF32, a silent precision
    drop below the reference's fp32: T15), or the older spelling ``allow_tf32=False`` alone (Triton reads it as
    "ieee"); ``allow_tf32=True`` is refused. Keywords or positions (``tl.dot(a, b, acc, "ieee")``) alike."""
    out: list[Violation] = []
    for node in ast.walk(k):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot"):
            continue
        kw = dict(zip(("input", "other", "acc", "input_precision", "allow_tf32"), node.args))
        kw.update({a.arg: a.value for a in node.keywords if a.arg})
        precision = kw.get("input_precision")
        tf32 = kw.get("allow_tf32")
        ieee = isinstance(precision, ast.Constant) and precision.value == "ieee"
        no_tf32 = precision is None and isinstance(tf32, ast.Constant) and tf32.value is False
        if not (ieee or no_tf32) or (isinstance(tf32, ast.Constant) and tf32.value is True):
            out.append(Violation(rule="T15.python.dtype_cast", file=filename, line=node.lineno,
                                 message=f"kernel `{k.name}`: tl.dot without input_precision=\"ieee\" computes fp32 "
                                         "inputs in TF32, below the reference's precision; pass input_precision=\"ieee\""))
    return out


def _triton_use_violations(tree: ast.Module, filename: str, triton: set[str], language: set[str],
                           inside: set[int]) -> list[Violation]:
    """Imports of triton submodules and ``triton.X`` / ``tl.X`` outside kernels beyond the helpers."""
    out: list[Violation] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if _device_lib_import(node):
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                parts = name.split(".")
                if parts[0] == "triton" and len(parts) > 1 and name != "triton.language":
                    out.append(_refused(parts[1], node, filename, f"importing `{name}`"))
            if isinstance(node, ast.ImportFrom) and node.module == "triton":
                for a in node.names:
                    if a.name not in TRITON_HELPERS:
                        out.append(_refused(a.name, node, filename, f"`from triton import {a.name}`"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and id(node) not in inside:
            if node.value.id in triton and node.attr not in TRITON_HELPERS:
                out.append(_refused(node.attr, node, filename, f"`{node.value.id}.{node.attr}`"))
            elif node.value.id in language and node.attr not in LANGUAGE_HELPERS:
                out.append(_refused(node.attr, node, filename, f"`{node.value.id}.{node.attr}` outside a kernel"))
    return out


def _refused(part: str, node: ast.AST, filename: str, what: str) -> Violation:
    rule = REFUSED_PARTS.get(part, "T1.python.native_access")
    return Violation(rule=rule, file=filename, line=getattr(node, "lineno", None),
                     message=f"{what} is not allowed: outside kernels only triton.cdiv, triton.next_power_of_2, the "
                             "decorators, triton.Config and tl dtypes may be used")


def decorator_data(tree: ast.Module, decorators: DecoratorCheck, inside: set[int]) -> list[ast.stmt]:
    """Module-level assignments only kernel decorators read (``CONFIGS = [triton.Config(...), ...]`` then
    ``@triton.autotune(configs=CONFIGS, ...)``): judged as decorator data by ``decorators``, bound once, never read
    outside kernels. The rewrite drops them (the allowlist refuses calls at module level)."""
    stores: dict[str, int] = {}
    for n in ast.walk(tree):
        for name in ([n.id] if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) else
                     n.names if isinstance(n, (ast.Global, ast.Nonlocal)) else []):
            stores[name] = stores.get(name, 0) + 1
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside}
    return [n for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id in decorators.seen
            and stores.get(n.targets[0].id) == 1 and n.targets[0].id not in read
            and n.targets[0].id not in decorators.functions]


def _rewrite(source: str, tree: ast.Module, kernels: list[ast.FunctionDef], triton: set[str],
             language: set[str], dropped: list[ast.stmt] = ()) -> str:  # type: ignore[assignment]
    """The file as the harness's allowlist sees it (line numbers kept; see the module docstring)."""
    lines = source.splitlines()
    names = {k.name for k in kernels}
    for node in ast.walk(tree):  # launches first: same-length edits, so later offsets stay right
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in names:
            _launch_to_call(lines, node)
    inside = {id(n) for k in kernels for n in ast.walk(k)}
    for node in ast.walk(tree):  # grid lambdas: `lambda meta: (cdiv(n, meta['B']),)` is judged as its body
        if isinstance(node, ast.Lambda) and id(node) not in inside and len(node.args.args) == 1 \
                and not (node.args.vararg or node.args.kwarg or node.args.kwonlyargs):
            _grid_lambda_to_body(lines, node)
    used = {id(n.value) for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Subscript))}
    used |= {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    fixed = rebound(tree, triton | language)  # a name rebound anywhere (`tl = self.h`) may not hold Triton
    for node in ast.walk(tree):  # `DT=tl.float16` at a launch: a Triton dtype is data, read as the number 1
        if isinstance(node, ast.Attribute) and id(node) not in inside and id(node) not in used \
                and node.lineno == node.end_lineno and is_dtype(node, triton - fixed, language - fixed):
            _blank(lines, node.lineno - 1, node.col_offset, node.end_col_offset or node.col_offset, "1")
    for stmt in tree.body:  # `FAST = tl.constexpr(True)`: its literal to the allowlist (it takes math calls on numbers)
        v = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(v, ast.Call) and is_literal(v) and v.lineno == v.end_lineno \
                and _language_constexpr(v.func, triton, language):
            _blank(lines, v.lineno - 1, v.col_offset, v.args[0].col_offset)
            _blank(lines, v.lineno - 1, v.args[0].end_col_offset or 0, v.end_col_offset or 0)
    _grid_functions_to_values(lines, tree, names, inside)  # the last in-line edits: they change a line's length
    for stmt in dropped:
        lines[stmt.lineno - 1] = f"{stmt.targets[0].id} = None"  # type: ignore[attr-defined]
        for i in range(stmt.lineno, stmt.end_lineno or stmt.lineno):
            lines[i] = ""
    for k in kernels:
        first = min([d.lineno for d in k.decorator_list] + [k.lineno])
        indent = " " * k.col_offset
        lines[first - 1] = f"{indent}from {EXTENSION} import {k.name}"
        for i in range(first, k.end_lineno or first):
            lines[i] = ""
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m == "triton" or m.startswith("triton.") for m in mods):
                binds = [f"import math as {b}" for b in sorted(triton | language)]
                if isinstance(node, ast.ImportFrom) and node.module == "triton" and not node.level:
                    # `from triton import cdiv`: a math function to the allowlist, as `triton.cdiv` is (so on a
                    # tensor it is torch compute, refused)
                    binds += [f"from math import ceil as {a.asname or a.name}" for a in node.names
                              if a.name in NUMBER_HELPERS]
                lines[node.lineno - 1] = "; ".join(binds)
                for i in range(node.lineno, node.end_lineno or node.lineno):
                    lines[i] = ""
    return "\n".join(lines) + "\n"


def _language_constexpr(func: ast.AST, triton: set[str], language: set[str]) -> bool:
    """``tl.constexpr`` or ``triton.language.constexpr``."""
    if not (isinstance(func, ast.Attribute) and func.attr == "constexpr"):
        return False
    v = func.value
    return isinstance(v, ast.Name) and v.id in language or isinstance(v, ast.Attribute) and v.attr == "language" \
        and isinstance(v.value, ast.Name) and v.value.id in triton


def _launch_to_call(lines: list[str], call: ast.Call) -> None:
    """``k[grid](a)`` -> ``k(grid, a)`` in place: '[' -> '(', '](' -> ', ' (the same length)."""
    sub = call.func
    assert isinstance(sub, ast.Subscript) and sub.end_lineno is not None and sub.end_col_offset is not None
    v = sub.value
    row, col = v.end_lineno - 1, v.end_col_offset  # type: ignore[operator]
    if lines[row][col:col + 1] != "[":
        return
    end_row, end_col = sub.end_lineno - 1, sub.end_col_offset
    if lines[end_row][end_col - 1:end_col + 1] != "](":
        return
    lines[row] = lines[row][:col] + "(" + lines[row][col + 1:]
    has_args = bool(call.args or call.keywords)
    lines[end_row] = lines[end_row][:end_col - 1] + (", " if has_args else ") ") + lines[end_row][end_col + 1:]
    if not has_args:  # k[grid]() -> k(grid)  (the closing paren becomes a space)
        close = call.end_col_offset - 1  # type: ignore[operator]
        r = call.end_lineno - 1  # type: ignore[operator]
        lines[r] = lines[r][:close] + " " + lines[r][close + 1:]


def _blank(lines: list[str], row: int, start: int, end: int, fill: str = "") -> None:
    """Replace columns [start, end) of line ``row`` (0-based) with ``fill`` padded by spaces to the same length."""
    text = lines[row]
    lines[row] = text[:start] + fill.ljust(end - start) + text[end:]


def _grid_lambda_to_body(lines: list[str], lam: ast.Lambda) -> None:
    """A grid function as the allowlist sees it: ``lambda meta: BODY`` -> ``BODY`` with every ``meta[...]`` read
    as the number ``1`` (Triton passes the launch's meta-parameters: Python numbers). Same lengths, in place."""
    body = lam.body
    if lam.lineno != body.lineno:  # a lambda whose body starts on another line: left to the allowlist as it is
        return
    _meta_reads_to_numbers(lines, lam.args.args[0].arg, body)
    _blank(lines, lam.lineno - 1, lam.col_offset, body.col_offset)


def _grid_functions_to_values(lines: list[str], tree: ast.Module, kernels: set[str], inside: set[int]) -> None:
    """A grid written as a local function, ``def grid(meta):`` / ``return (cdiv(n, meta['B']),)``, used only as
    launches' grid: judged as ``grid = (cdiv(n, 1),)`` (as a grid lambda is). Anything else is left as it is."""
    for outer in ast.walk(tree):
        if not isinstance(outer, ast.FunctionDef) or id(outer) in inside:
            continue
        grids = {id(n.func.slice) for n in ast.walk(outer) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name)
                 and n.func.value.id in kernels}
        for fn in ast.walk(outer):
            if fn is outer or not isinstance(fn, ast.FunctionDef) or not grid_function(fn):
                continue
            uses = [n for n in ast.walk(outer) if isinstance(n, ast.Name) and n.id == fn.name]
            if not uses or any(not isinstance(n.ctx, ast.Load) or id(n) not in grids for n in uses):
                continue
            ret = fn.body[0]
            _meta_reads_to_numbers(lines, fn.args.args[0].arg, ret.value)  # type: ignore[attr-defined]
            lines[fn.lineno - 1] = " " * fn.col_offset + "if True:"
            row = ret.lineno - 1
            lines[row] = lines[row][:ret.col_offset] + f"{fn.name} =" + lines[row][ret.col_offset + len("return"):]


def _meta_reads_to_numbers(lines: list[str], param: str, body: ast.AST) -> None:
    """Every single-line ``param[...]`` read in ``body`` -> the number ``1`` (same lengths, in place)."""
    # meta holds every launch argument, tensors too: `meta['x_ptr'].copy_(...)` / `meta['x_ptr'][0]` stay as written
    # (an unknown name, a tensor to the allowlist)
    used = {id(n.value) for n in ast.walk(body) if isinstance(n, (ast.Attribute, ast.Subscript))}
    used |= {id(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}
    for node in ast.walk(body):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == param \
                and node.lineno == node.end_lineno and id(node) not in used:
            _blank(lines, node.lineno - 1, node.col_offset, node.end_col_offset or node.col_offset, "1")
