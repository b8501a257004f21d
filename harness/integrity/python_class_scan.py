"""Class rules of the ``model_new.py`` checker: bases, class bodies, and the kinds of ``self.<attr>`` set in ``__init__``.

A mixin of ``python_ast._Checker``: ``ModelNew`` must derive from
``torch.nn.Module`` only, helper classes from allowed bases; a class body holds
methods, a docstring and literal constants; the attributes ``__init__`` stores
on ``self`` get a kind (submodule, tensor, number, the extension) that the
forward rules use.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.python_kinds import ClassInfo, M, S, T, U, make_kind


class ClassScan:
    """The scan of class definitions; mixed into ``python_ast._Checker``."""

    aliases: dict[str, str]
    constants: dict[str, tuple[str, str | None]]
    functions: dict[str, ast.FunctionDef]
    classes: dict[str, ClassInfo]

    if TYPE_CHECKING:
        def flag(self, rule: str, node: ast.AST | None, what: str) -> None: ...
        def path_of(self, node: ast.AST) -> str | None: ...
        def check_decorators(self, node: ast.FunctionDef) -> None: ...

    def scan_class(self, node: ast.ClassDef) -> None:
        if node.name in self.classes or node.name in self.functions:
            self.flag("T3.python.alias_reference", node, f"`{node.name}` is defined twice")
        bases = []
        for base in node.bases:
            path = self.path_of(base)
            if path is None and isinstance(base, ast.Name):
                path = base.id
            bases.append(path or ast.unparse(base))
        for kw in node.keywords:
            self.flag("T1.python.class_base", kw, "class keywords (metaclass=...) are not allowed")
        for dec in node.decorator_list:
            self.flag("T1.python.decorator", dec, "class decorators are not allowed")
        kind = "other"
        if node.name == "ModelNew":
            if bases != ["torch.nn.Module"]:
                self.flag("T3.python.inherit_reference", node,
                          f"ModelNew derives from {', '.join(bases) or 'nothing'}; it must derive from torch.nn.Module only")
            kind = "modelnew"
        else:
            for b in bases:
                if b == "Model" or b.startswith("model."):
                    self.flag("T3.python.inherit_reference", node, f"`{node.name}` derives from the reference Model")
                elif b in {"torch.Tensor"} or b.startswith("torch.overrides") or b.startswith("torch.utils"):
                    self.flag("T11.python.tensor_subclass", node, f"`{node.name}` subclasses {b}; return plain tensors")
                elif b not in allow.ALLOWED_BASES:
                    self.flag("T1.python.class_base", node,
                              f"base `{b}` is not allowed; allowed: {', '.join(sorted(allow.ALLOWED_BASES))}")
            kind = "function" if "torch.autograd.Function" in bases else "module"
        info = ClassInfo(node.name, node, kind)
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                self.check_decorators(stmt)
                if stmt.name in {"__torch_function__", "__torch_dispatch__"}:
                    self.flag("T11.python.tensor_subclass", stmt, f"`{stmt.name}` hooks are not allowed")
                elif stmt.name.startswith("__") and stmt.name.endswith("__") and stmt.name != "__init__":
                    # run implicitly (conversions, comparisons, containers, pybind11's casters: a __float__ handed to
                    # a `double` parameter ran NumPy compute in session 36's red team), out of reach of the call rules
                    self.flag("T7.python.module_override", stmt,
                              f"defining `{stmt.name}` is not allowed: dunder methods run implicitly; define __init__, "
                              "forward and named helpers")
                elif kind == "function" and stmt.name in {"setup_context", "jvp", "vmap"}:
                    # Function.apply runs setup_context after forward (under no_grad too), out of reach of the call
                    # rules: session 37's red team computed the output there with torch (graded correct)
                    self.flag("T7.python.module_override", stmt,
                              f"defining `{stmt.name}` on an autograd.Function is not allowed: torch runs it "
                              "implicitly; use forward(ctx, ...) and backward")
                elif stmt.name in allow.MODULE_MACHINERY and kind != "function":
                    self.flag("T7.python.module_override", stmt,
                              f"overriding nn.Module's `{stmt.name}` is not allowed; define __init__, forward and helpers")
                info.methods[stmt.name] = stmt
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and (stmt.value is None or self.is_literal(stmt.value)):
                continue
            elif isinstance(stmt, ast.Pass):
                continue
            else:
                self.flag("T1.python.module_statement", stmt,
                          "a class body may hold methods, a docstring and literal constants only")
        self.classes[node.name] = info
        init = info.methods.get("__init__")
        if init is not None:
            info.attrs = self.scan_self_attrs(init)

    def is_literal(self, value: ast.AST) -> bool:
        try:
            ast.literal_eval(value)
        except ValueError:
            return False
        return True

    def scan_self_attrs(self, init: ast.FunctionDef) -> dict[str, tuple[str, str | None]]:
        """Kinds of ``self.<attr>`` assigned in ``__init__`` (modules, tensors, numbers)."""
        # A parameter bound again in __init__ (``a = torch.zeros(n)``) is no longer the number it was passed as:
        # session 37's red team stored such a tensor as `self.a`, and forward's arithmetic on it passed as numbers.
        rebound = {n.id for n in ast.walk(init) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
        params = {a.arg for a in init.args.args[1:] + init.args.kwonlyargs} - rebound
        attrs: dict[str, tuple[str, str | None]] = {}
        for node in ast.walk(init):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self":
                        kind = self.init_value_kind(node.value, params)
                        previous = attrs.get(target.attr)
                        if previous is not None and previous != kind and "ext" in (previous[0], kind[0]):
                            kind = make_kind(U)  # the extension only when every assignment stores it
                        attrs[target.attr] = kind
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute) and node.value is not None:
                attrs[node.target.attr] = self.init_value_kind(node.value, params)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in {"register_buffer", "register_parameter"} and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                attrs[node.args[0].value] = make_kind(T)
        return attrs

    def init_value_kind(self, value: ast.AST, params: set[str]) -> tuple[str, str | None]:
        if isinstance(value, ast.Constant):
            return make_kind(S) if isinstance(value.value, (int, float)) and not isinstance(value.value, bool) else make_kind(M)
        if isinstance(value, ast.Name):
            if value.id in params:
                return make_kind(S)
            if self.aliases.get(value.id) == "@ext":  # self.ext = cuda_extension: calls through it are extension calls
                return make_kind("ext")
            return self.constants.get(value.id, make_kind(U))
        if isinstance(value, ast.BinOp):
            kinds = {self.init_value_kind(value.left, params)[0], self.init_value_kind(value.right, params)[0]}
            return make_kind(S) if kinds <= {S} else make_kind(U)
        if isinstance(value, ast.UnaryOp):
            return self.init_value_kind(value.operand, params)
        if isinstance(value, (ast.IfExp, ast.BoolOp)):
            # self.stride = stride if stride is not None else kernel_size / stride or kernel_size: numbers if each is
            options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else value.values
            kinds = {self.init_value_kind(v, params) for v in options}
            return kinds.pop() if len(kinds) == 1 and next(iter(kinds))[0] in {S, M} else make_kind(U)
        if isinstance(value, ast.Tuple):
            return make_kind(M)
        if isinstance(value, ast.Call):
            path = self.path_of(value.func)
            if isinstance(value.func, ast.Name) and value.func.id in self.classes:
                return make_kind("hmodule", value.func.id)
            if isinstance(value.func, ast.Name) and value.func.id in {"int", "float", "bool", "len", "abs", "round"}:
                return make_kind(S)
            if isinstance(value.func, ast.Name) and value.func.id in {"range", "list", "tuple"} and all(
                    self.init_value_kind(a, params)[0] in {S, M} or (isinstance(a, ast.Call) and isinstance(
                        a.func, ast.Name) and a.func.id == "range") for a in value.args):
                return make_kind(M)  # self.idx = list(range(0, n, 2)): numbers (iterated, they are numbers)
            if path:
                if path.startswith("math."):
                    return make_kind(S)
                if path.startswith("torch.nn.") and path.split(".")[2][:1].isupper() and path != "torch.nn.Parameter":
                    return make_kind("tmodule", path)
                return make_kind(T)
            return make_kind(T)
        return make_kind(U)
