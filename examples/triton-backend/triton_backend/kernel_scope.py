"""Static rules for the parts of a Triton file the harness's allowlist never sees: kernel decorators, attribute
chains inside kernel bodies, the module constants kernels read, and kernel objects used other than by a launch.

The rewrite of :mod:`triton_backend.integrity` blanks every kernel, decorators included, before the allowlist runs,
and Triton runs Python from both at launch (``@triton.heuristics`` lambdas and ``triton.Config`` pre-hooks get the
launch's real torch tensors; under the interpreter a kernel body is Python too; compiled, Triton evaluates attribute
chains of globals while compiling). Session 41's red team hid a torch fallback in a heuristics lambda that looked for
the op audit's dispatch mode (``torch._C._len_torch_dispatch_stack()``) and computed with torch only when none was
installed: graded correct. So decorator arguments are data (numbers, strings, lists, dicts, ``triton.Config``) plus
heuristics lambdas of arithmetic on ``args['name']``; a kernel body may not reach ``_`` attributes nor walk out of
``triton.language`` (``tl.core.builtins.eval``); kernels read only module constants bound to literals; outside
kernels a kernel is only launched (``k[grid](...)``), never ``k.fn(...)`` (its body run as Python on torch tensors).
Grid functions (``lambda meta: ...``, a local ``def grid(meta): return ...``) get every launch argument in ``meta``,
the tensors too, and the rewrite reads ``meta['NAME']`` as a number: they may read ``meta`` no other way (session 42:
``meta['out'].copy_(torch arithmetic on meta['x'])`` passed as an allocation method on an unknown tensor).
"""

from __future__ import annotations

import ast
import types
from typing import Any

from cuda_agent.harness.integrity import Violation

#: Builtins a decorator expression may call.
DECORATOR_BUILTINS = frozenset({"min", "max", "int", "float", "bool", "abs", "len", "range", "list", "tuple", "dict"})
#: Expression nodes a decorator may hold besides names, attributes, calls, subscripts and lambdas (checked apart).
_DATA_NODES = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
               ast.IfExp, ast.keyword, ast.Load, ast.Store, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
               ast.ListComp, ast.comprehension, ast.Starred)
_FUNCTION_STATEMENTS = (ast.Return, ast.Assign, ast.AnnAssign, ast.For, ast.If, ast.Pass)


def literal_constants(tree: ast.Module, triton: set[str] | None = None, language: set[str] | None = None) -> set[str]:
    """Module-level names bound only to literals (numbers, strings, ``tl.constexpr(literal)``) or Triton dtypes
    (``ACC = tl.float32``, immutable; Triton lets kernels read dtype globals): what kernels read."""
    triton, language = triton or set(), language or set()
    bound: dict[str, list[ast.AST | None]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            bound.setdefault(node.target.id, []).append(node.value)
    return {name for name, values in bound.items()
            if all(v is not None and (is_literal(v) or is_dtype(v, triton, language)) for v in values)}


def is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1 \
            and isinstance(node.func, ast.Attribute) and node.func.attr == "constexpr":
        node = node.args[0]
    while isinstance(node, ast.UnaryOp):
        node = node.operand
    if isinstance(node, ast.BinOp):
        return is_literal(node.left) and is_literal(node.right)
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None)))


class DecoratorCheck:
    """Decorator expressions of kernels, with the module-level assignments and functions they reach."""

    def __init__(self, tree: ast.Module, filename: str, triton: set[str], language: set[str], kernels: set[str],
                 helpers: frozenset[str], language_helpers: frozenset[str]) -> None:
        self.filename, self.triton, self.language, self.kernels = filename, triton, language, kernels
        self.helpers, self.language_helpers = helpers, language_helpers
        self.assigned = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                         if isinstance(t, ast.Name)}
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in kernels}
        self.seen: set[str] = set()
        self.out: list[Violation] = []

    def check(self, k: ast.FunctionDef) -> list[Violation]:
        """Violations of ``k``'s decorators (``T1.python.decorator``)."""
        for dec in k.decorator_list:
            self._expr(dec, set(), k.name)
        return self.out

    def _bad(self, node: ast.AST, where: str, what: str) -> None:
        self.out.append(Violation(
            rule="T1.python.decorator", file=self.filename, line=getattr(node, "lineno", None),
            message=f"decorator of kernel `{where}`: {what}; decorator arguments may be numbers, strings, lists, dicts, "
                    "triton.Config(kwargs, num_warps=..., num_stages=...) and @triton.heuristics lambdas of "
                    "arithmetic on args['name'] (no hooks, no torch, no calls but triton.cdiv/next_power_of_2 and "
                    "min/max/int)"))

    def _expr(self, node: ast.AST, local: set[str], where: str, heuristics: bool = False) -> None:
        if isinstance(node, ast.Lambda):
            if not heuristics:
                return self._bad(node, where, "a function (lambda) outside a @triton.heuristics dict runs at launch")
            a = node.args
            if a.defaults or a.kw_defaults or a.vararg or a.kwarg:
                return self._bad(node, where, "a heuristics lambda with defaults or *args keeps state across calls")
            return self._expr(node.body, local | {p.arg for p in a.args + a.kwonlyargs + a.posonlyargs}, where)
        if isinstance(node, ast.Name):
            return self._name(node, local, where)
        if isinstance(node, ast.Attribute):
            if not self._helper_chain(node):
                self._bad(node, where, f"`{ast.unparse(node)}` is not a Triton helper")
            return None
        if isinstance(node, ast.Subscript):
            if not (isinstance(node.value, ast.Name) and node.value.id in local):
                return self._bad(node, where, f"`{ast.unparse(node)}`: only a lambda's args['name'] may be indexed")
            return self._expr(node.slice, local, where)
        if isinstance(node, ast.Call):
            return self._call(node, local, where)
        if isinstance(node, ast.ListComp):  # the loops bind the names the element reads
            local = local | {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        if not isinstance(node, _DATA_NODES):
            return self._bad(node, where, f"`{ast.unparse(node)[:60]}` ({type(node).__name__}) is not data")
        for child in ast.iter_child_nodes(node):
            self._expr(child, local, where)
        return None

    def _name(self, node: ast.Name, local: set[str], where: str) -> None:
        name = node.id
        if name in local or name in self.triton or name in self.language or name in {"True", "False", "None"}:
            return
        if name in self.assigned:
            if name not in self.seen:  # a module-level value: judged as if written in the decorator
                self.seen.add(name)
                self._expr(self.assigned[name], set(), where)
            return
        self._bad(node, where, f"`{name}` is not data (functions, kernels and modules may not be passed)")

    def _call(self, node: ast.Call, local: set[str], where: str) -> None:
        f = node.func
        heuristics = False
        if isinstance(f, ast.Attribute) and self._helper_chain(f):
            heuristics = f.attr == "heuristics"
        elif isinstance(f, ast.Name) and f.id in DECORATOR_BUILTINS and f.id not in local:
            pass
        elif isinstance(f, ast.Name) and f.id in self.functions:
            if f.id not in self.seen:
                self.seen.add(f.id)
                self._function(self.functions[f.id], where)
        elif isinstance(f, ast.Attribute) and f.attr == "append" and isinstance(f.value, ast.Name) \
                and f.value.id in local:
            pass
        else:
            return self._bad(node, where, f"calling `{ast.unparse(f)[:60]}`")
        values = [a for a in node.args[:1]] + [kw.value for kw in node.keywords if kw.arg == "values"]
        for a in [*node.args, *(kw.value for kw in node.keywords)]:
            if heuristics and any(a is v for v in values) and isinstance(a, ast.Dict):
                for key, v in zip(a.keys, a.values):  # {'NAME': lambda args: ...}: the one place a lambda may be
                    if key is not None:
                        self._expr(key, local, where)
                    self._expr(v, local, where, heuristics=True)
            else:
                self._expr(a, local, where)
        return None

    def _function(self, fn: ast.FunctionDef, where: str) -> None:
        """A module-level function a decorator calls (``configs=get_configs()``): statements over data only."""
        if fn.decorator_list or fn.args.defaults or fn.args.kw_defaults:
            return self._bad(fn, where, f"function `{fn.name}` has decorators or defaults")
        local = {p.arg for p in fn.args.args + fn.args.kwonlyargs} | {
            n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.stmt) and stmt is not fn and not isinstance(stmt, (*_FUNCTION_STATEMENTS, ast.Expr)):
                return self._bad(stmt, where, f"function `{fn.name}`: `{type(stmt).__name__}` statements")
        for stmt in fn.body:
            self._statement(stmt, local, where)
        return None

    def _statement(self, stmt: ast.stmt, local: set[str], where: str) -> None:
        if isinstance(stmt, ast.Expr) and not (isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
                                               and stmt.value.func.attr == "append"):
            return self._bad(stmt, where, f"`{ast.unparse(stmt)[:60]}`: only list.append(...) calls may stand alone")
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                self._statement(child, local, where)
            else:
                self._expr(child, local, where)
        return None

    def _helper_chain(self, node: ast.Attribute) -> bool:
        """``triton.<helper>``, ``tl.<helper>`` or ``triton.language.<helper>``."""
        if isinstance(node.value, ast.Name):
            if node.value.id in self.triton:
                return node.attr in self.helpers
            return node.value.id in self.language and node.attr in self.language_helpers
        v = node.value
        return isinstance(v, ast.Attribute) and v.attr == "language" and isinstance(v.value, ast.Name) \
            and v.value.id in self.triton and node.attr in self.language_helpers


def kernel_attribute_violations(k: ast.FunctionDef, filename: str, triton: set[str], language: set[str],
                                kernels: set[str], libs: dict[str, str] | None = None,
                                constants: set[str] | None = None) -> list[Violation]:
    """Attributes inside a kernel body: no ``_`` names, no chain out of ``triton.language``, no kernel attributes;
    parameter defaults that are literals, tl dtypes or module constants bound to them (``constants``, from
    :func:`literal_constants`: ``BLOCK: tl.constexpr = DEFAULT_BLOCK``) only. ``libs``: local names of libdevice
    modules (walked from that module)."""
    out: list[Violation] = []
    libs = libs or {}
    for d in k.args.defaults + [d for d in k.args.kw_defaults if d is not None]:
        if isinstance(d, ast.Name) and d.id in (constants or set()):
            continue
        if not is_literal(d) and not is_dtype(d, triton, language - set(libs)):
            out.append(Violation(rule="T12.python.state_in_forward", file=filename, line=d.lineno,
                                 message=f"kernel `{k.name}`: parameter default `{ast.unparse(d)[:60]}` is not a "
                                         "literal (a mutable default keeps state across launches)"))
    decorators = {id(n) for d in k.decorator_list for n in ast.walk(d)}
    for node in ast.walk(k):
        if id(node) in decorators or not isinstance(node, ast.Attribute):
            continue
        if node.attr.startswith("_"):
            out.append(Violation(rule="T1.python.reflection", file=filename, line=node.lineno,
                                 message=f"kernel `{k.name}`: `{ast.unparse(node)[:80]}` reaches a private or dunder "
                                         "attribute"))
            continue
        chain = _chain(node)
        if chain is None or (chain[0] not in triton and chain[0] not in language and chain[0] not in kernels):
            continue  # a value's attribute (x.dtype, acc.to(...)): Triton's own tensor methods
        if chain[0] in kernels:
            why = "a kernel's attributes are Triton's runtime"
        else:
            why = _outside_language(chain[1:], root_is_triton=chain[0] in triton, root=libs.get(chain[0]))
        if why:
            out.append(Violation(rule="T1.python.native_access", file=filename, line=node.lineno,
                                 message=f"kernel `{k.name}`: `{ast.unparse(node)[:80]}`: {why}; a kernel may use "
                                         "triton.language (tl.*, tl.math, tl.extra.*.libdevice)"))
    return _outermost(out)


def _outermost(found: list[Violation]) -> list[Violation]:
    """One violation a line (a chain's every prefix is an Attribute node too)."""
    seen: set[tuple[str, int | None]] = set()
    return [v for v in found if not ((v.rule, v.line) in seen or seen.add((v.rule, v.line)))]  # type: ignore[func-returns-value]


def _chain(node: ast.Attribute) -> list[str] | None:
    parts: list[str] = []
    cur: ast.AST = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    return [cur.id, *reversed(parts)]


def is_dtype(node: ast.AST, triton: set[str], language: set[str]) -> bool:
    """``tl.float32`` or ``triton.language.float32``: one of Triton's dtypes (immutable, like a literal)."""
    chain = _chain(node) if isinstance(node, ast.Attribute) else None
    if chain is None:
        return False
    if chain[0] in triton and len(chain) == 3 and chain[1] == "language":
        chain = [chain[0], chain[2]]
    if len(chain) != 2 or (chain[0] not in language and chain[0] not in triton):
        return False
    import triton.language as tl

    return isinstance(getattr(tl, chain[1], None), tl.dtype)


def _outside_language(attrs: list[str], root_is_triton: bool, root: str | None = None) -> str:
    """Why walking ``attrs`` from ``triton`` (or ``triton.language``, or the module named ``root``) leaves Triton's
    language, or ''."""
    import importlib

    import triton
    import triton.language as tl

    obj: Any = importlib.import_module(root) if root else triton if root_is_triton else tl
    for i, attr in enumerate(attrs):
        if isinstance(obj, types.ModuleType) and not (obj.__name__.startswith("triton.language")
                                                      or (obj is triton and i == 0 and attr == "language")):
            return f"`{attr}` of module `{obj.__name__}` is outside triton.language"
        obj = getattr(obj, attr, None)
        if obj is None:
            return ""  # an unknown name: Triton itself refuses it
    if isinstance(obj, types.ModuleType):
        return "" if obj.__name__.startswith("triton.language") else f"module `{obj.__name__}` is not triton.language"
    if isinstance(obj, (int, float, str, bool)):
        return ""
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return "" if str(module).startswith("triton") else f"`{attrs[-1]}` is `{module}`'s, not Triton's"


def kernel_value_violations(tree: ast.Module, filename: str, kernels: set[str], inside: set[int]) -> list[Violation]:
    """Outside kernels a kernel name may only be launched: ``k[grid](...)``."""
    launched = {id(n.func.value) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                and isinstance(n.func.value, ast.Name) and n.func.value.id in kernels}
    out: list[Violation] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in kernels and isinstance(node.ctx, ast.Load) \
                and id(node) not in inside and id(node) not in launched:
            out.append(Violation(rule="T1.python.native_access", file=filename, line=node.lineno,
                                 message=f"kernel `{node.id}` is used other than launched: outside kernels a "
                                         f"@triton.jit function may only be launched as `{node.id}[grid](...)` "
                                         "(`.fn`, `.run`, passing it on reach Triton's runtime)"))
    return out


def grid_function(fn: ast.FunctionDef) -> bool:
    """A grid written as a local function: ``def NAME(meta):`` on one line, then one ``return VALUE`` on one line."""
    a = fn.args
    if fn.decorator_list or fn.returns or len(a.args) != 1 or a.posonlyargs or a.vararg or a.kwarg or a.kwonlyargs \
            or a.defaults or len(fn.body) != 1 or not isinstance(fn.body[0], ast.Return) or fn.body[0].value is None:
        return False
    ret = fn.body[0]
    return a.args[0].annotation is None and ret.lineno > fn.lineno and ret.lineno == ret.end_lineno \
        and (a.args[0].end_lineno or 0) == fn.lineno


def grid_meta_violations(tree: ast.Module, filename: str, inside: set[int]) -> list[Violation]:
    """Grid functions (one-argument lambdas and :func:`grid_function` defs outside kernels) may read their argument
    only as ``meta['NAME']`` values: Triton passes every launch argument in it, the output tensors too, and the
    rewrite reads those values as numbers (``meta['out'].copy_(...)`` / ``meta['x'][0]`` would be torch on tensors)."""
    out: list[Violation] = []
    for fn in ast.walk(tree):
        if id(fn) in inside or not (isinstance(fn, ast.Lambda) and len(fn.args.args) == 1
                                    or isinstance(fn, ast.FunctionDef) and grid_function(fn)):
            continue
        param = fn.args.args[0].arg
        body = fn.body if isinstance(fn, ast.Lambda) else fn.body[0].value  # type: ignore[attr-defined]
        reads = {id(n.value) for n in ast.walk(body) if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)
                 and isinstance(n.slice.value, str)}
        misused = {id(n.value) for n in ast.walk(body) if isinstance(n, (ast.Attribute, ast.Subscript))}
        misused |= {id(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}
        for node in ast.walk(body):
            if isinstance(node, ast.Subscript) and id(node) in misused and isinstance(node.value, ast.Name) \
                    and node.value.id == param or isinstance(node, ast.Name) and node.id == param and id(node) not in reads:
                out.append(Violation(rule="T1.python.tensor_method", file=filename, line=node.lineno,
                                     message=f"grid function reads `{ast.unparse(node)[:60]}`: a grid may only read its "
                                             f"argument as {param}['NAME'] (a meta-parameter, a number); it also holds "
                                             "the launch's tensors"))
                break
    return out


def rebound(tree: ast.Module, names: set[str]) -> set[str]:
    """Those of ``names`` (module-level import aliases) bound anywhere else too: assigned, a parameter, a loop or
    ``with``/``except`` target, a nested import, a def or class."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, (ast.Import, ast.ImportFrom)) and n not in tree.body:
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return out & names
