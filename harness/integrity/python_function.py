"""The function-body checker of ``model_new.py``: 'forward' rules (strict allowlist) and 'init' rules.

Used by ``python_ast``: every function ``ModelNew.forward`` reaches is checked
under the forward rules, everything else under the lenient ``__init__`` rules.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.python_calls import CallChecks
from cuda_agent.harness.integrity.python_kinds import (
    NON_COMPUTE,
    TORCH_MODULE_PREFIXES,
    ClassInfo,
    M,
    P,
    S,
    T,
    U,
    make_kind,
)
from cuda_agent.harness.integrity.violation import Violation

if TYPE_CHECKING:
    from cuda_agent.harness.integrity.python_ast import _Checker


class FunctionChecker(CallChecks):
    """Checks one function body under 'forward' (strict allowlist) or 'init' (lenient) rules."""

    def __init__(self, top: _Checker, node: ast.FunctionDef, mode: str, cls: ClassInfo | None) -> None:
        self.top = top
        self.node = node
        self.mode = mode
        self.cls = cls
        self.env: dict[str, tuple[str, str | None]] = {}
        self.input_names: set[str] = set()
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        for i, a in enumerate(args):
            if i == 0 and cls is not None and not is_static:
                self.env[a.arg] = make_kind("self")
            elif i == 0 and cls is not None and cls.kind == "function" and is_static:
                self.env[a.arg] = make_kind("ctx")
            elif mode == "init" and node.name == "__init__":
                self.env[a.arg] = make_kind(S)
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
            kind = self.iter_kind(node.iter)
            self.assign(node.target, kind, None, node)
            self.branches(node, node.body, node.orelse)
        elif isinstance(node, ast.With):
            for item in node.items:
                self.with_item(item, node)
            self.block(node.body)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.block(node.body)
            for h in node.handlers:
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
        if kind[0] in {M, S}:
            return make_kind(S)
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

    # ------------------------------------------------------------------ expressions
    def expr(self, node: ast.AST | None) -> tuple[str, str | None]:
        if node is None:
            return make_kind(M)
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)
        return make_kind(U)

    def e_Constant(self, node: ast.Constant) -> tuple[str, str | None]:
        v = node.value
        return make_kind(S) if isinstance(v, (int, float, complex)) and not isinstance(v, bool) else make_kind(M)

    def e_JoinedStr(self, node: ast.JoinedStr) -> tuple[str, str | None]:
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                kind = self.expr(v.value)
                if self.strict and kind[0] in {T, U}:
                    self.flag("T1.python.operator", v, "formatting a tensor runs PyTorch compute")
        return make_kind(M)

    def e_Name(self, node: ast.Name) -> tuple[str, str | None]:
        name = node.id
        if name in self.env:
            return self.env[name]
        if name in self.top.aliases:
            path = self.top.aliases[name]
            if path.startswith("@ext"):
                return make_kind("ext") if path == "@ext" else make_kind("extfn", path)
            if path.startswith("torch"):
                rule = self.top.torch_rule(path, self.mode)
                if rule:
                    self.flag(rule, node, f"`{path}` is not allowed here")
                    return make_kind("X")
                return self.torch_kind(path)
            if path.startswith("math"):
                return make_kind("mod", path) if path == "math" else make_kind("mathfn", path)
            return make_kind("mod", path)
        if name in self.top.constants:
            return self.top.constants[name]
        if name in self.top.functions:
            return make_kind("helperfn", name)
        if name in self.top.classes:
            return make_kind("helpercls", name)
        if name in allow.BUILTINS_ALLOWED or name in allow.BUILTINS_NUMERIC or name in allow.BUILTIN_RULES \
                or name in {"print", "True", "False", "None", "NotImplemented", "Ellipsis"}:
            return make_kind("builtin", name)
        return make_kind(U)

    def torch_kind(self, path: str) -> tuple[str, str | None]:
        if path in allow.TORCH_CONSTANTS:
            return make_kind(M)
        if path in TORCH_MODULE_PREFIXES or path == "torch":
            return make_kind("mod", path)
        return make_kind("torchfn", path)

    def e_Attribute(self, node: ast.Attribute) -> tuple[str, str | None]:
        attr = node.attr
        path = self.top.path_of(node)
        if path is not None:
            if path.startswith("@ext"):
                return make_kind("extfn", path)
            if path.startswith("torch"):
                rule = self.top.torch_rule(path, self.mode)
                if rule:
                    self.flag(rule, node, self.torch_message(path, rule))
                    return make_kind("X")
                return self.torch_kind(path)
            if path.startswith("math."):
                return make_kind("mathfn", path)
        return self.attr_kind(node, self.expr(node.value))

    def attr_kind(self, node: ast.Attribute, recv: tuple[str, str | None]) -> tuple[str, str | None]:
        """Kind of ``<recv>.<attr>`` where the receiver's kind is known."""
        attr = node.attr
        tag = recv[0]
        if attr.startswith("__") or tag == "X":
            return make_kind("X")  # dunders are reported by the universal pass
        if tag == "self":
            if self.cls is not None and attr in self.cls.methods:
                method = self.cls.methods[attr]
                if any(isinstance(d, ast.Name) and d.id == "property" for d in method.decorator_list):
                    self.top.reach(self.mode, self.cls.name, attr)  # a property runs on attribute access
                    return make_kind(U)
                return make_kind("method", attr)
            if self.cls is not None and attr in self.cls.attrs:
                return self.cls.attrs[attr]
            if attr == "training":
                return make_kind(M)
            return make_kind(U)
        if tag in {T, U}:
            if attr in allow.TENSOR_METADATA_ATTRS:
                return make_kind(M) if attr in {"shape", "dtype", "device", "layout", "names"} or attr.startswith("is_") \
                    or attr == "requires_grad" else make_kind(S)
            if attr in allow.TENSOR_VIEW_ATTRS:
                return make_kind(T)
            if self.strict:
                rule = "T1.python.private_torch" if attr.startswith("_") else "T1.python.tensor_method"
                self.flag(rule, node, f"tensor attribute `.{attr}` is not on the metadata allowlist "
                          f"({', '.join(sorted(allow.TENSOR_METADATA_ATTRS | allow.TENSOR_VIEW_ATTRS))})")
            return make_kind(U)
        if tag == "tmodule":
            if attr.startswith("_"):
                self.flag("T1.python.reflection", node, "private attributes of torch modules are not allowed")
                return make_kind(U)
            return make_kind(T) if ("weight" in attr or "bias" in attr or attr.startswith("running_")) else make_kind(M)
        if tag in {M, S, P}:
            if attr.startswith("_") and self.strict:
                self.flag("T1.python.reflection", node, "private attributes are not allowed")
            return make_kind(M)
        if tag == "helpercls":
            return make_kind("applyfn", recv[1]) if attr == "apply" else make_kind(U)
        if tag == "ext":  # self.ext.fn where __init__ stored the extension module
            return make_kind("extfn", "@ext." + attr)
        if tag == "stream":
            if attr in {"cuda_stream", "device", "device_index", "stream_id"}:
                return make_kind(S)
            self.flag("T9.python.stream", node, f"stream.{attr} is not allowed; pass .cuda_stream to the extension")
            return make_kind("X")
        if tag == "ctx":
            if self.strict and attr not in allow.AUTOGRAD_CTX_ATTRS:
                self.flag("T1.python.tensor_method", node, f"ctx.{attr} is not allowed")
            return make_kind("ctxattr", attr) if attr in allow.AUTOGRAD_CTX_ATTRS else make_kind(U)
        if tag == "container" and self.strict:
            return make_kind("containerattr", attr)
        return make_kind(U)

    def torch_message(self, path: str, rule: str) -> str:
        if rule == "T1.python.torch_call":
            return (f"`{path}` computes with PyTorch; forward may only call the extension, allocate "
                    "(torch.empty/empty_like/zeros...), and read metadata")
        return f"`{path}` is not allowed"

    def e_Subscript(self, node: ast.Subscript) -> tuple[str, str | None]:
        recv = self.expr(node.value)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        single_int = True
        for part in parts:
            if isinstance(part, ast.Slice):
                single_int = False
                for b in (part.lower, part.upper, part.step):
                    if b is not None:
                        self.index_part(b)
            else:
                kind = self.index_part(part)
                if kind[0] != S:
                    single_int = False
        if len(parts) > 1:
            single_int = False
        if recv[0] == M:
            return make_kind(S) if single_int else make_kind(M)
        if recv[0] == "container":
            return make_kind(U)
        if recv[0] == "list":
            return make_kind(U)
        if recv[0] == "tmodule":  # self.network[i] of an nn.Sequential/ModuleList: a submodule (calling it is refused)
            return recv
        return make_kind(T) if recv[0] == T else make_kind(U)

    def index_part(self, node: ast.AST) -> tuple[str, str | None]:
        kind = self.expr(node)
        if kind[0] == P:
            self.flag("T12.python.cache_key", node, "indexing by data_ptr() is a cache; not allowed")
        elif self.strict and kind[0] in {T, U} and not (isinstance(node, ast.Constant)):
            self.flag("T1.python.operator", node, "indexing with a tensor (gather) runs PyTorch compute")
        return kind

    def e_BinOp(self, node: ast.BinOp) -> tuple[str, str | None]:
        left, right = self.expr(node.left), self.expr(node.right)
        if isinstance(node.op, ast.MatMult):
            if self.strict:
                self.flag("T1.python.operator", node, "`@` is a PyTorch matmul; write the kernel")
            return make_kind(T)
        if left[0] in NON_COMPUTE and right[0] in NON_COMPUTE:
            return make_kind(S) if left[0] == S and right[0] == S else make_kind(M)
        if self.strict:
            self.flag("T1.python.operator", node,
                      "arithmetic on tensors runs PyTorch compute; only Python numbers (sizes, strides) may be combined")
        return make_kind(T)

    def e_UnaryOp(self, node: ast.UnaryOp) -> tuple[str, str | None]:
        kind = self.expr(node.operand)
        if kind[0] in NON_COMPUTE:
            return kind if kind[0] == S else make_kind(M)
        if self.strict:
            self.flag("T1.python.operator", node, "unary operators on tensors run PyTorch compute")
        return make_kind(T)

    def e_BoolOp(self, node: ast.BoolOp) -> tuple[str, str | None]:
        kinds = [self.expr(v) for v in node.values]
        if self.strict and any(k[0] in {T, U} for k in kinds[:-1]):
            self.flag("T1.python.operator", node, "the truth value of a tensor runs PyTorch compute")
        return kinds[-1] if len({k[0] for k in kinds}) == 1 else make_kind(U)

    def e_Compare(self, node: ast.Compare) -> tuple[str, str | None]:
        kinds = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        identity = all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
        if any(k[0] == P for k in kinds):
            self.flag("T12.python.cache_key", node, "comparing data_ptr() values is a cache check; not allowed")
        elif self.strict and not identity and any(k[0] not in NON_COMPUTE for k in kinds):
            self.flag("T1.python.operator", node, "comparing tensors runs PyTorch compute")
        return make_kind(M)

    def e_IfExp(self, node: ast.IfExp) -> tuple[str, str | None]:
        self.test(node.test)
        results = []
        kinds = []
        for branch in (node.body, node.orelse):
            start = len(self.top.violations)
            before = self.ext_called
            self.ext_called = False
            kinds.append(self.expr(branch))
            results.append((start, len(self.top.violations), self.ext_called))
            self.ext_called = before or self.ext_called
        self.relabel_fallback(results)
        return kinds[0] if kinds[0] == kinds[1] else make_kind(U)

    def e_Tuple(self, node: ast.Tuple | ast.List) -> tuple[str, str | None]:
        kinds = [self.expr(e) for e in node.elts]
        if isinstance(node, ast.Tuple) and all(k[0] in {S, M} for k in kinds):
            return make_kind(M)
        return make_kind("list", T) if any(k[0] in {T, U} or k == ("list", T) for k in kinds) else make_kind("list")

    e_List = e_Tuple

    def e_Dict(self, node: ast.Dict) -> tuple[str, str | None]:
        for k in node.keys:
            if k is not None and self.expr(k)[0] == P:
                self.flag("T12.python.cache_key", k, "keying by data_ptr() is a cache; not allowed")
        for v in node.values:
            self.expr(v)
        return make_kind("list")

    def e_Set(self, node: ast.Set) -> tuple[str, str | None]:
        for e in node.elts:
            self.expr(e)
        return make_kind("list")

    def e_Starred(self, node: ast.Starred) -> tuple[str, str | None]:
        return self.expr(node.value)

    def e_NamedExpr(self, node: ast.NamedExpr) -> tuple[str, str | None]:
        kind = self.expr(node.value)
        self.env[node.target.id] = kind
        return kind

    def e_Lambda(self, node: ast.Lambda) -> tuple[str, str | None]:
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.expr(default)
        saved = dict(self.env)
        for a in node.args.args:
            self.env[a.arg] = make_kind(U)
        self.expr(node.body)
        self.env = saved
        return make_kind("lambda")

    def comprehension(self, node: ast.AST, elts: list[ast.AST]) -> tuple[str, str | None]:
        saved = dict(self.env)
        for gen in node.generators:
            kind = self.iter_kind(gen.iter)
            self.assign(gen.target, kind, None, node)
            for cond in gen.ifs:
                self.test(cond)
        for e in elts:
            self.expr(e)
        self.env = saved
        return make_kind("list")

    def e_ListComp(self, node: ast.ListComp) -> tuple[str, str | None]:
        return self.comprehension(node, [node.elt])

    e_SetComp = e_ListComp
    e_GeneratorExp = e_ListComp

    def e_DictComp(self, node: ast.DictComp) -> tuple[str, str | None]:
        return self.comprehension(node, [node.key, node.value])
