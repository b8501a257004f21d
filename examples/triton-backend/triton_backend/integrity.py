"""Static integrity rules for Triton ``model_new.py`` files (THREATS.md, the classes visible in the source).

A Triton solution keeps its kernels (``@triton.jit`` functions) and ``ModelNew`` in one file, the form KernelBench's
Triton backend uses. Two parts are judged differently:

- **kernel bodies** are Triton device code: they may use ``tl``/``triton.language``, their parameters, other
  kernels, module constants and a few builtins; a reference to torch is ``T1.python.torch_call``, to anything
  else ``T1.python.import_not_allowed``;
- **everything else** is judged by the harness's own ``model_new.py`` allowlist (the one every CUDA solution
  meets), after a line-preserving rewrite: each kernel definition becomes an import of an extension function of
  the same name, each launch ``k[grid](a, b)`` becomes the extension call ``k(grid, a, b)``, and ``triton``
  becomes a module of pure helpers. So ``ModelNew.forward`` may only launch kernels, allocate outputs, read
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

from triton_backend.kernel_scope import (DecoratorCheck, kernel_attribute_violations, kernel_value_violations,
                                         literal_constants)

#: The extension module name the rewritten file imports (the allowlist's default).
EXTENSION = "cuda_extension"
#: ``triton.<name>`` usable outside kernels.
TRITON_HELPERS = frozenset({"cdiv", "next_power_of_2", "jit", "autotune", "heuristics", "Config", "language"})
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


def _device_lib_import(node: ast.Import | ast.ImportFrom) -> bool:
    """An import of a libdevice module, and of nothing else."""
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
    constants = literal_constants(tree)
    for k in kernels:
        out.violations += _kernel_violations(k, filename, set(out.kernels), triton | language, constants)
        out.violations += _precision_violations(k, filename, language | triton)
    out.violations += _triton_use_violations(tree, filename, triton, language, inside)
    names = set(out.kernels)
    decorators = DecoratorCheck(tree, filename, triton, language, names, TRITON_HELPERS, LANGUAGE_HELPERS)
    for k in kernels:
        out.violations += decorators.check(k)
        out.violations += kernel_attribute_violations(k, filename, triton, language, names, device_libs(tree))
    out.violations += kernel_value_violations(tree, filename, names, inside)
    rewritten = _rewrite(source, tree, kernels, triton, language)
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
    for node in ast.walk(k):
        if k.decorator_list and any(node is d or node in ast.walk(d) for d in k.decorator_list):
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


def _precision_violations(k: ast.FunctionDef, filename: str, language: set[str]) -> list[Violation]:
    """``tl.dot`` must say ``input_precision="ieee"`` (Triton's default for fp32 inputs is TF32, a silent precision
    drop below the reference's fp32: T15); ``allow_tf32=True`` likewise."""
    out: list[Violation] = []
    for node in ast.walk(k):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot"):
            continue
        kw = {a.arg: a.value for a in node.keywords}
        precision = kw.get("input_precision")
        tf32 = kw.get("allow_tf32")
        ieee = isinstance(precision, ast.Constant) and precision.value == "ieee"
        if not ieee or (isinstance(tf32, ast.Constant) and tf32.value is True):
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


def _rewrite(source: str, tree: ast.Module, kernels: list[ast.FunctionDef], triton: set[str],
             language: set[str]) -> str:
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
                binds = sorted(triton | language)
                lines[node.lineno - 1] = "; ".join(f"import math as {b}" for b in binds) if binds else ""
                for i in range(node.lineno, node.end_lineno or node.lineno):
                    lines[i] = ""
    return "\n".join(lines) + "\n"


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
    param = lam.args.args[0].arg
    body = lam.body
    if lam.lineno != body.lineno:  # a lambda whose body starts on another line: left to the allowlist as it is
        return
    # meta holds every launch argument, tensors too: `meta['x_ptr'].copy_(...)` / `meta['x_ptr'][0]` stay as written
    # (an unknown name, a tensor to the allowlist)
    used = {id(n.value) for n in ast.walk(body) if isinstance(n, (ast.Attribute, ast.Subscript))}
    used |= {id(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}
    for node in ast.walk(body):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == param \
                and node.lineno == node.end_lineno and id(node) not in used:
            _blank(lines, node.lineno - 1, node.col_offset, node.end_col_offset or node.col_offset, "1")
    _blank(lines, lam.lineno - 1, lam.col_offset, body.col_offset)
