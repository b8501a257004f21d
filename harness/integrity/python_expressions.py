"""Expression rules of the ``model_new.py`` checker: the kind of every expression, and which are PyTorch compute.

A mixin of ``python_function.FunctionChecker``: one ``e_<Node>`` method per
expression type (names, attributes, subscripts, operators, containers,
comprehensions; calls are in ``python_calls``). Each returns the expression's
kind (``python_kinds``) and, under the 'forward' rules, flags tensor
arithmetic, comparisons, truth tests and non-metadata attributes.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.python_kinds import (
    M,
    MATH_CONSTANTS,
    NON_COMPUTE,
    P,
    S,
    T,
    TORCH_MODULE_PREFIXES,
    U,
    is_static,
    make_kind,
)

if TYPE_CHECKING:
    from cuda_agent.harness.integrity.python_ast import _Checker
    from cuda_agent.harness.integrity.python_kinds import ClassInfo


class ExpressionChecks:
    """Checks of expressions (all but calls); mixed into ``FunctionChecker``."""

    top: _Checker
    mode: str
    cls: ClassInfo | None
    env: dict[str, tuple[str, str | None]]
    ext_called: bool

    if TYPE_CHECKING:
        strict: bool

        def flag(self, rule: str, node: ast.AST, what: str) -> None: ...
        def test(self, node: ast.AST) -> None: ...
        def relabel_fallback(self, results: list[tuple[int, int, bool]]) -> None: ...
        def iter_kind(self, node: ast.AST) -> tuple[str, str | None]: ...
        def assign(self, target: ast.AST, kind: tuple[str, str | None], value: ast.AST | None,
                   stmt: ast.AST) -> None: ...

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
                if path in MATH_CONSTANTS:
                    return make_kind(S)
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
                return make_kind(S) if path in MATH_CONSTANTS else make_kind("mathfn", path)
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
            if "weight" in attr or "bias" in attr or attr.startswith("running_"):
                return make_kind(T)
            if (recv[1] or "").startswith("param:") and attr not in allow.MODULE_CONFIG_ATTRS:
                return make_kind(U)  # an annotation is no proof: `x.T` of a tensor passed as `x: nn.Linear` is a tensor
            return make_kind(M)
        if tag in {M, S, P}:
            if attr.startswith("_") and self.strict:
                self.flag("T1.python.reflection", node, "private attributes are not allowed")
            return make_kind(M)
        if tag == "helpercls":
            if self.cls is not None and recv[1] == self.cls.name and attr in self.cls.methods \
                    and is_static(self.cls.methods[attr]):
                return make_kind("method", attr)  # ModelNew.launch(x): the static method, as self.launch(x)
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
        if recv == ("list", M):  # shape = list(x.shape): shape[d] is a number, shape[:d] the same kind of list
            return make_kind(M) if all(not isinstance(p, ast.Slice) for p in parts) else recv
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
        if "list" in (left[0], right[0]) and left[0] in NON_COMPUTE and right[0] in NON_COMPUTE:
            # [x] + rest, shape * 2: a list still, of numbers only when both sides are ([x] + [] was metadata)
            numbers = all(k == ("list", M) or k[0] in {S, M} for k in (left, right))
            return make_kind("list", M) if numbers else make_kind("list", T)
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
        if kinds and all(k[0] in {S, M} for k in kinds):
            return make_kind("list", M)  # [B, C, H]: numbers (a name bound to it loses that if changed in place)
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
