"""The function-body checker of ``model_new.py``: its statement rules, under 'forward' (strict) or 'init' rules.

Used by ``python_ast``: every function ``ModelNew.forward`` reaches is checked
under the forward rules, everything else under the lenient ``__init__`` rules.
Expressions are checked by the ``python_expressions`` mixin, calls by the
``python_calls`` mixin.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.python_calls import CallChecks
from cuda_agent.harness.integrity.python_expressions import ExpressionChecks
from cuda_agent.harness.integrity.python_kinds import (
    M,
    NON_COMPUTE,
    S,
    T,
    U,
    is_static,
    make_kind,
    number_annotation,
    submodule_param,
    ClassInfo,
)
from cuda_agent.harness.integrity.violation import Violation

if TYPE_CHECKING:
    from cuda_agent.harness.integrity.python_ast import _Checker


class FunctionChecker(ExpressionChecks, CallChecks):
    """Checks one function body under 'forward' (strict allowlist) or 'init' (lenient) rules."""

    def __init__(self, top: _Checker, node: ast.FunctionDef, mode: str, cls: ClassInfo | None) -> None:
        self.top = top
        self.node = node
        self.mode = mode
        self.cls = cls
        self.env: dict[str, tuple[str, str | None]] = {}
        self.input_names: set[str] = set()
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        static = is_static(node)
        for i, a in enumerate(args):
            if i == 0 and cls is not None and not static:
                self.env[a.arg] = make_kind("self")
            elif i == 0 and cls is not None and cls.kind == "function" and static:
                self.env[a.arg] = make_kind("ctx")
            elif mode == "init" and node.name == "__init__":
                self.env[a.arg] = make_kind(S)
            elif number_annotation(a.annotation) and (cls is None or (
                    cls.kind == "modelnew" and node.name not in {"forward", "__init__"})):
                # def _out_size(n: int, k: int) -> int (module level, or a ModelNew method other than forward):
                # numbers; every call from forward is checked to pass numbers there (check_number_args), and such a
                # helper is reached only by such calls (handing it over as a value is refused)
                self.env[a.arg] = make_kind(S)
            elif self.module_annotation(a.annotation):
                # def fused_linear(x, linear: nn.Linear): its weights are read like self.fc's; calling it is refused
                self.env[a.arg] = make_kind("tmodule", "param:" + self.module_annotation(a.annotation))
            elif a.annotation is None and cls is not None and cls.kind == "modelnew" and i > 0 and not static \
                    and node.name not in {"forward", "__init__"} and submodule_param(cls, node.name, i - 1, a.arg):
                # def conv_relu(self, x, conv) called only as self.conv_relu(x, self.conv): a module, as if annotated
                self.env[a.arg] = make_kind("tmodule", "param:" + submodule_param(cls, node.name, i - 1, a.arg))
            else:
                self.env[a.arg] = make_kind(T)
                self.input_names.add(a.arg)
        for extra in (node.args.vararg, node.args.kwarg):
            if extra is not None:
                self.env[extra.arg] = make_kind("list")
                self.input_names.add(extra.arg)
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.expr(default)
        self.ext_called = False
        self.changed_lists = _changed_lists(node)

    def module_annotation(self, annotation: ast.AST | None) -> str:
        """``torch.nn.Linear`` for a parameter annotated ``nn.Linear`` (a torch.nn module class), else ''."""
        path = self.top.path_of(annotation) if annotation is not None else None
        if path and path.startswith("torch.nn.") and path.count(".") == 2 and path.split(".")[2][:1].isupper() \
                and path not in {"torch.nn.Parameter", "torch.nn.ParameterList", "torch.nn.ParameterDict"}:
            return path
        return ""

    @property
    def strict(self) -> bool:
        return self.mode == "forward"

    def flag(self, rule: str, node: ast.AST, what: str) -> None:
        self.top.flag(rule, node, what)

    def run(self) -> None:
        self.block(self.node.body)
        if self.strict and self.ext_called:
            self.top.ext_called_in_forward = True

    # ------------------------------------------------------------------ statements
    def block(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value)
        elif isinstance(node, ast.Assign):
            kind = self.expr(node.value)
            for target in node.targets:
                self.assign(target, kind, node.value, node)
        elif isinstance(node, ast.AnnAssign):
            kind = self.expr(node.value) if node.value is not None else make_kind(U)
            if node.value is not None:
                self.assign(node.target, kind, node.value, node)
        elif isinstance(node, ast.AugAssign):
            self.aug_assign(node)
        elif isinstance(node, (ast.If, ast.While)):
            self.test(node.test)
            self.branches(node, node.body, node.orelse)
        elif isinstance(node, ast.For):
            it, target = node.iter, node.target
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" \
                    and len(it.args) == 1 and not it.keywords and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                # for i, layer in enumerate(self.layers): a counter and the iterable's element (session 37's
                # false-rejection hunt: KernelBench 1_MLP written this way was refused)
                self.assign(target.elts[0], make_kind(S), None, node)
                self.assign(target.elts[1], self.iter_kind(it.args[0]), None, node)
            else:
                self.assign(target, self.iter_kind(it), None, node)
            self.branches(node, node.body, node.orelse)
        elif isinstance(node, ast.With):
            for item in node.items:
                self.with_item(item, node)
            self.block(node.body)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.block(node.body)
            for h in node.handlers:
                if h.name:  # `except E as err`: an exception object (formatting it is not tensor compute)
                    self.env[h.name] = make_kind(M)
                self.block(h.body)
            self.block(node.orelse)
            self.block(node.finalbody)
        elif isinstance(node, ast.Raise):
            if node.exc is not None:
                self.expr(node.exc)
        elif isinstance(node, ast.Assert):
            self.test(node.test)
            if node.msg is not None:
                self.expr(node.msg)
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                if not isinstance(t, ast.Name):
                    self.flag("T12.python.state_in_forward" if self.strict else "T7.python.monkeypatch", t,
                              "deleting attributes/items is not allowed")
        elif isinstance(node, ast.FunctionDef):
            self.top.check_decorators(node)
            self.env[node.name] = make_kind("lambda")
            sub = FunctionChecker(self.top, node, self.mode, None)
            sub.env = {**self.env, **sub.env}
            sub.run()
            self.ext_called |= sub.ext_called
        elif isinstance(node, ast.ClassDef):
            self.flag("T1.python.module_statement", node, "classes must be defined at module level")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if self.strict:
                self.flag("T1.python.module_statement", node, "imports belong at module level")
        elif isinstance(node, (ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)):
            return
        elif isinstance(node, ast.Match):
            self.expr(node.subject)
            for case in node.cases:
                self.block(case.body)
        else:
            self.flag("T1.python.module_statement", node, f"statement `{type(node).__name__}` is not allowed")

    def branches(self, node: ast.AST, body: list[ast.stmt], orelse: list[ast.stmt]) -> None:
        """Run both branches; torch code beside an extension call in the other branch is a guarded fallback (T2)."""
        results = []
        for stmts in (body, orelse):
            start = len(self.top.violations)
            before = self.ext_called
            self.ext_called = False
            self.block(stmts)
            results.append((start, len(self.top.violations), self.ext_called))
            self.ext_called = before or self.ext_called
        self.relabel_fallback(results)

    def relabel_fallback(self, results: list[tuple[int, int, bool]]) -> None:
        if not self.strict or len(results) != 2:
            return
        for (a_start, a_end, _), (_, _, other_ext) in ((results[0], results[1]), (results[1], results[0])):
            if not other_ext:
                continue
            for i in range(a_start, a_end):
                v = self.top.violations[i]
                if v.rule.startswith("T1.python.") and v.rule not in {"T1.python.extension_unused"}:
                    self.top.violations[i] = Violation(
                        rule="T2.python.guarded_fallback",
                        message=v.message + " (in a branch beside an extension call: a fallback)",
                        file=v.file, line=v.line)

    def test(self, node: ast.AST) -> None:
        kind = self.expr(node)
        if self.strict and kind[0] in {T, U}:
            self.flag("T1.python.operator", node, "testing a tensor's truth value runs PyTorch compute")

    def with_item(self, item: ast.withitem, stmt: ast.AST) -> None:
        ctx = item.context_expr
        target = ctx.func if isinstance(ctx, ast.Call) else ctx
        path = self.top.path_of(target)
        if path and path.startswith("torch"):
            rule = self.top.torch_rule(path, "init")
            if rule:
                self.flag(rule, ctx, f"`with {path}` is not allowed")
                return
            if path in allow.TORCH_CONTEXT_MANAGERS:
                if isinstance(ctx, ast.Call):
                    for a in ctx.args:
                        self.expr(a)
                return
        if path and path.startswith("contextlib"):
            self.flag("T2.python.suppress_fallback", ctx, "contextlib managers can swallow an extension failure")
            return
        self.flag("T2.python.suppress_fallback", ctx,
                  "only `with torch.no_grad()`, `torch.inference_mode()` or `torch.cuda.device(...)` are allowed; "
                  "other context managers can swallow an extension failure")

    def assign(self, target: ast.AST, kind: tuple[str, str | None], value: ast.AST | None, stmt: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if kind == ("list", M) and target.id in self.changed_lists:
                kind = make_kind("list")  # something else may be put in it: its items are no longer known numbers
            self.env[target.id] = kind
            if value is not None and self.root_is_input(value) and kind[0] in {T, U}:
                self.input_names.add(target.id)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            elt_kind = make_kind(S) if kind[0] in {M, S} else (make_kind(T) if kind[0] == T else make_kind(U))
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for i, elt in enumerate(target.elts):
                if values is not None:
                    self.assign(elt, self.silent_kind(values[i]), values[i], stmt)
                else:
                    self.assign(elt.value if isinstance(elt, ast.Starred) else elt,
                                make_kind("list") if isinstance(elt, ast.Starred) else elt_kind, None, stmt)
            return
        if isinstance(target, ast.Starred):
            self.assign(target.value, make_kind("list"), None, stmt)
            return
        root = target
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        root_kind = self.env.get(root.id) if isinstance(root, ast.Name) else None
        if root_kind and root_kind[0] == "self":
            if isinstance(target, ast.Attribute) and target.value is root and \
                    (target.attr == "forward" or target.attr in allow.MODULE_MACHINERY):
                self.flag("T7.python.module_override", stmt,
                          f"assigning self.{target.attr} replaces nn.Module machinery; define methods instead")
                return
            if self.strict:
                self.flag("T12.python.state_in_forward", stmt,
                          "forward must not store anything on self (results would be cached across calls)")
            return
        if root_kind and root_kind[0] == "ctx" and isinstance(target, ast.Attribute):
            return
        if isinstance(target, ast.Subscript):
            self.expr(target.slice)
            if isinstance(root, ast.Name) and root.id in self.input_names:
                self.flag("T5.python.input_mutation", stmt, "forward must not write into its inputs")
                return
            if root_kind and root_kind[0] == "list":
                return
            if root_kind is None and isinstance(root, ast.Name) and root.id not in self.env:
                self.top.check_foreign_assignment(target, stmt)
                return
            if self.strict:
                self.flag("T1.python.operator", stmt,
                          "indexed assignment into a tensor runs a PyTorch copy/fill kernel; do it in the extension")
            return
        if isinstance(target, ast.Attribute):
            if isinstance(root, ast.Name) and root.id in self.input_names:
                self.flag("T5.python.input_mutation", stmt, "forward must not modify its inputs")
                return
            if isinstance(root, ast.Name) and root.id in self.env:
                if self.strict:
                    self.flag("T1.python.tensor_method", stmt, "assigning tensor attributes is not allowed in forward")
                return
            self.top.check_foreign_assignment(target, stmt)

    def aug_assign(self, node: ast.AugAssign) -> None:
        value = self.expr(node.value)
        if isinstance(node.target, ast.Name):
            current = self.env.get(node.target.id, make_kind(U))
            if node.target.id in self.input_names and current[0] in {T, U}:
                self.flag("T5.python.input_mutation", node, "in-place arithmetic on an input is not allowed")
                return
            if self.strict and (current[0] not in NON_COMPUTE or value[0] not in NON_COMPUTE):
                self.flag("T1.python.operator", node, "arithmetic on tensors runs PyTorch compute; do it in the extension")
            return
        self.assign(node.target, make_kind(U), None, node)
        if self.strict and isinstance(node.target, ast.Subscript) and value[0] not in NON_COMPUTE:
            self.flag("T1.python.operator", node, "in-place arithmetic on tensors runs PyTorch compute")

    def iter_kind(self, node: ast.AST) -> tuple[str, str | None]:
        kind = self.expr(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            return make_kind(S)
        if kind[0] in {M, S} or kind == ("list", M):  # for s in shape[:dim] of shape = list(x.shape)
            return make_kind(S)
        if kind[0] == "tmodule":  # for layer in self.layers (ModuleList/Sequential): a submodule, as self.layers[i]
            return kind
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"enumerate", "zip"}:
            return make_kind(U)
        return make_kind(T) if kind[0] == T else make_kind(U)

    def root_is_input(self, node: ast.AST) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return isinstance(node, ast.Name) and node.id in self.input_names

    def silent_kind(self, node: ast.AST) -> tuple[str, str | None]:
        """Kind of an expression already checked (no new violations)."""
        start = len(self.top.violations)
        ext = self.ext_called
        kind = self.expr(node)
        del self.top.violations[start:]
        self.ext_called = ext
        return kind


def _changed_lists(fn: ast.FunctionDef) -> set[str]:
    """Names a function changes in place other than by storing a number literal (``shape.append(x)``, ``shape[i] =
    y``, ``shape += [...]``): a ``list(x.shape)`` bound to one is a list of anything, not of numbers."""
    out: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.attr in {"append", "extend", "insert", "__setitem__", "__iadd__"}:
            if not all(isinstance(a, ast.Constant) for a in n.args) or n.keywords or n.func.attr == "extend":
                out.add(n.func.value.id)
        elif isinstance(n, (ast.Assign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and not isinstance(n.value, ast.Constant):
                    out.add(t.value.id)
                if isinstance(n, ast.AugAssign) and isinstance(t, ast.Name):
                    out.add(t.id)
    return out
