"""Static integrity checks of a KernelBench single-file solution (``load_inline``).

A single file builds its own extension at import time::

    from torch.utils.cpp_extension import load_inline
    cuda_src = \"\"\"... __global__ void k(...) ... torch::Tensor f(torch::Tensor x) {...}\"\"\"
    ext = load_inline(name="ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["f"])

    class ModelNew(nn.Module):
        def forward(self, x):
            return ext.f(x)

The workspace checks do not apply as they are (``load_inline`` itself is
``T1.python.dynamic_code`` in a ``model_new.py``), so this module

- recovers the C++/CUDA source strings of every ``load_inline`` call
  (``cpp_sources`` / ``cuda_sources``: literals, module-level string
  constants, ``+`` of those, lists of those, ``textwrap.dedent`` of those) and
  runs the C++ source rules over them;
- rewrites, line for line, each ``X = load_inline(...)`` into
  ``import cuda_extension as X`` (and ``self.X = load_inline(...)`` into
  ``self.X = cuda_extension``), drops the ``torch.utils.cpp_extension``
  import, and runs the ``model_new.py`` allowlist over the result, so
  ``ModelNew.forward`` is judged exactly like a workspace's.

Sources built at run time (``%``/``format``/f-strings with values, a loop, a
file read) cannot be recovered: they are listed in :attr:`SingleFileCheck.notes`
and only the runtime checks judge that code.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

from cuda_agent.harness.integrity import check_cpp_text, check_model_new_source
from cuda_agent.harness.integrity.cpp_rules import external_blas
from cuda_agent.harness.integrity.violation import Violation, dedupe

#: The extension module name the rewritten file imports (the allowlist's default).
EXTENSION_NAME = "cuda_extension"

#: ``load_inline`` parameters holding C++/CUDA source, with their positions.
_SOURCE_PARAMS = {"cpp_sources": 1, "cuda_sources": 2}

_CPP_EXTENSION = "torch.utils.cpp_extension"


@dataclass
class InlineSource:
    """One recovered source string of a ``load_inline`` call."""

    label: str
    """Where it came from, e.g. ``solution.py: cuda_sources of load_inline (line 40)``."""
    text: str
    """The C++/CUDA text."""


@dataclass
class SingleFileCheck:
    """What the static layer found in a single-file solution."""

    violations: list[Violation] = field(default_factory=list)
    """Broken rules (empty = accepted by the static layer)."""
    sources: list[InlineSource] = field(default_factory=list)
    """C++/CUDA strings that were recovered and checked."""
    notes: list[str] = field(default_factory=list)
    """Sources that could not be recovered statically (left to the runtime checks)."""
    load_calls: int = 0
    """``load_inline`` calls found."""


class _Unresolved(Exception):
    """A value is not a static string (or list of them)."""


def _is_load_inline(func: ast.AST, aliases: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in aliases
    return isinstance(func, ast.Attribute) and func.attr == "load_inline"


def _constants(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level ``NAME = value`` assignments (the last one wins, as at run time)."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


def _resolve(node: ast.AST, constants: dict[str, ast.AST], depth: int = 0) -> list[str]:
    """The strings ``node`` evaluates to statically (a str gives one element, a list several)."""
    if depth > 20:
        raise _Unresolved("constants nest too deeply")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Constant) and node.value is None:
        return []
    if isinstance(node, ast.JoinedStr):
        if all(isinstance(v, ast.Constant) for v in node.values):
            return ["".join(str(v.value) for v in node.values)]  # type: ignore[attr-defined]
        raise _Unresolved("an f-string with values")
    if isinstance(node, ast.Name):
        if node.id not in constants:
            raise _Unresolved(f"`{node.id}` is not a module-level constant")
        return _resolve(constants[node.id], constants, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for elt in node.elts for s in _resolve(elt, constants, depth + 1)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _resolve(node.left, constants, depth + 1), _resolve(node.right, constants, depth + 1)
        if isinstance(node.left, (ast.List, ast.Tuple)) or isinstance(node.right, (ast.List, ast.Tuple)):
            return left + right
        if len(left) == 1 and len(right) == 1:
            return [left[0] + right[0]]
        raise _Unresolved("`+` of lists held in names")
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "dedent":
            return [textwrap.dedent(s) for s in _resolve(node.args[0], constants, depth + 1)]
    raise _Unresolved(f"`{ast.unparse(node)[:60]}` is built at run time")


def _source_args(call: ast.Call) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for param, pos in _SOURCE_PARAMS.items():
        if len(call.args) > pos:
            found[param] = call.args[pos]
    for kw in call.keywords:
        if kw.arg in _SOURCE_PARAMS:
            found[kw.arg] = kw.value
    return found


def _read_dedents(tree: ast.Module, constants: dict[str, ast.AST], aliases: set[str]) -> list[ast.stmt] | None:
    """The module-level assignments to rewrite when ``textwrap`` is used only as ``textwrap.dedent`` (or an imported
    ``dedent``) of sources this module reads (``_resolve``): then the import goes with them, as the
    ``torch.utils.cpp_extension`` one does. None when textwrap is used any other way (the import stays, refused)."""
    modules = {a.asname or a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names
               if a.name == "textwrap"}
    funcs = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "textwrap"
             for a in n.names if a.name == "dedent"}
    if not modules and not funcs:
        return []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    statements: list[ast.stmt] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in modules | funcs):
            continue
        if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in (parents.get(node), node)):
            continue
        call = parents.get(parents.get(node)) if node.id in modules else parents.get(node)
        func = call.func if isinstance(call, ast.Call) else None
        if not (isinstance(call, ast.Call) and (func is node or (isinstance(func, ast.Attribute) and func.value is node
                                                                 and func.attr == "dedent"))):
            return None
        try:
            _resolve(call, constants)
        except _Unresolved:
            return None
        stmt: ast.AST | None = call
        while stmt is not None and not isinstance(stmt, ast.stmt):
            stmt = parents.get(stmt)
        loads = isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and _is_load_inline(
            stmt.value.func, aliases)
        if not (stmt in tree.body and isinstance(stmt, (ast.Assign, ast.AnnAssign)) or loads):
            return None
        if not loads:
            statements.append(stmt)  # type: ignore[arg-type]
    return statements


def _rewrite_lines(source: str, tree: ast.Module, aliases: set[str], dedents: list[ast.stmt] | None = None) -> str:
    """The file with load_inline bindings turned into extension imports, line numbers kept."""
    lines = source.split("\n")

    def replace(node: ast.stmt, text: str) -> None:
        indent = lines[node.lineno - 1][: node.col_offset]
        lines[node.lineno - 1] = indent + text
        for i in range(node.lineno, node.end_lineno or node.lineno):
            lines[i] = ""

    dropped = {_CPP_EXTENSION, "textwrap"} if dedents is not None else {_CPP_EXTENSION}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in dropped:
            replace(node, "pass")
        elif isinstance(node, ast.Import) and any(a.name in dropped for a in node.names):
            others = [ast.unparse(ast.Import(names=[a])) for a in node.names if a.name not in dropped]
            replace(node, "; ".join(others) or "pass")
    for node in dedents or []:  # NAME = textwrap.dedent(<source read above>): a string constant
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target  # type: ignore[attr-defined]
        replace(node, f"{ast.unparse(target)} = ''")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        if not (isinstance(node.value, ast.Call) and _is_load_inline(node.value.func, aliases)):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and node in tree.body:
            replace(node, f"import {EXTENSION_NAME} as {target.id}")
        elif isinstance(target, ast.Attribute):
            replace(node, f"{ast.unparse(target)} = {EXTENSION_NAME}")
    return "\n".join(lines) + f"\nimport {EXTENSION_NAME}\n"


def check_single_file(source: str, filename: str = "model_new.py", *, allowed_libraries: tuple[str, ...] = ()) -> SingleFileCheck:
    """Static integrity layer of a single-file solution (see the module doc).

    :param source: the solution file's text.
    :param filename: name used in violations and labels.
    :param allowed_libraries: vendor libraries the backend's skill allows (C++ rules).
    """
    result = SingleFileCheck()
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        result.violations.append(Violation(rule="T1.python.no_model_new", message=f"cannot parse: {exc.msg}",
                                           file=filename, line=exc.lineno))
        return result
    aliases = {"load_inline"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == _CPP_EXTENSION:
            aliases |= {a.asname or a.name for a in node.names if a.name == "load_inline"}
    constants = _constants(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_load_inline(node.func, aliases)):
            continue
        result.load_calls += 1
        args = _source_args(node)
        if not args:
            result.notes.append(f"load_inline at line {node.lineno} passes its sources in a form not recognised")
        for param, value in args.items():
            where = f"{param} of load_inline (line {node.lineno})"
            try:
                texts = _resolve(value, constants)
            except _Unresolved as exc:
                result.notes.append(f"{where} is not statically recoverable ({exc}); only the runtime checks apply to it")
                continue
            for i, text in enumerate(texts):
                label = f"{filename}: {where}" + (f"[{i}]" if len(texts) > 1 else "")
                result.sources.append(InlineSource(label, text))
                result.violations.extend(check_cpp_text(text, label, allowed_libraries=allowed_libraries))
    # the file's sources together (a declaration in cpp_sources, its use in cuda_sources): BLAS it never defines
    whole = "\n".join(src.text for src in result.sources)
    result.violations.extend(external_blas(whole, f"{filename}: load_inline sources", allowed_libraries))
    if result.load_calls == 0:
        result.notes.append("no load_inline call found; the file's extension, if any, is not checked statically")
    rewritten = _rewrite_lines(source, tree, aliases, _read_dedents(tree, constants, aliases))
    result.violations.extend(check_model_new_source(rewritten, filename, extension_names=(EXTENSION_NAME,)))
    result.violations = dedupe(result.violations)
    return result
