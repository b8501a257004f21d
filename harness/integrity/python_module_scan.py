"""Module-level rules of the ``model_new.py`` checker: imports' aliases, top-level statements, constants, decorators.

A mixin of ``python_ast._Checker``: the scan records what every top-level name
is bound to (imported module, constant, function, class) and refuses any
module-level statement other than imports, definitions and literal constants.
Class bodies are scanned by ``python_class_scan.ClassScan``.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.python_kinds import (
    TIMER_PATHS,
    ClassInfo,
    M,
    S,
    U,
    is_main_guard,
    make_kind,
    try_only_reraises,
)


class ModuleScan:
    """The module-level scan; mixed into ``python_ast._Checker``."""

    extension_names: set[str]
    aliases: dict[str, str]
    constants: dict[str, tuple[str, str | None]]
    functions: dict[str, ast.FunctionDef]
    classes: dict[str, ClassInfo]

    if TYPE_CHECKING:
        def flag(self, rule: str, node: ast.AST | None, what: str) -> None: ...
        def path_of(self, node: ast.AST) -> str | None: ...
        def torch_rule(self, path: str, mode: str) -> str | None: ...
        def scan_class(self, node: ast.ClassDef) -> None: ...

    def scan_module(self, tree: ast.Module) -> None:
        top_level: list[ast.stmt] = []
        for node in tree.body:
            top_level.extend(node.body if isinstance(node, ast.Try) and try_only_reraises(node) else [node])
        for node in top_level:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in self.extension_names:
                        self.aliases[a.asname or a.name] = "@ext"
                    elif a.name in allow.ALLOWED_IMPORTS:
                        if a.asname:
                            self.aliases[a.asname] = a.name
                        else:
                            self.aliases[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                module = node.module or ""
                for a in node.names:
                    local = a.asname or a.name
                    if module in self.extension_names:
                        self.aliases[local] = "@ext." + a.name
                    elif module in allow.ALLOWED_IMPORTS and a.name != "*":
                        self.aliases[local] = f"{module}.{a.name}"
        for node in tree.body:
            self.scan_statement(node)

    def scan_statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # docstring
        if isinstance(node, ast.FunctionDef):
            self.check_decorators(node)
            if node.name in self.functions or node.name in self.classes:
                self.flag("T3.python.alias_reference", node, f"`{node.name}` is defined twice")
            self.functions[node.name] = node
            return
        if isinstance(node, ast.ClassDef):
            self.scan_class(node)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    if target.id == "ModelNew":
                        self.flag("T3.python.alias_reference", node,
                                  "ModelNew must be a class defined in model_new.py, not an assignment")
                        continue
                    if target.id in self.extension_names or self.aliases.get(target.id, "").startswith("@ext"):
                        self.flag("T1.python.dynamic_code", node, "the extension module must be imported, not built or rebound")
                        continue
                    self.constants[target.id] = self.const_kind(node.value, node) if node.value is not None else make_kind(U)
                else:
                    self.check_foreign_assignment(target, node)
            return
        if isinstance(node, ast.If) and is_main_guard(node.test):
            return  # never runs when imported as a module
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            path = self.path_of(node.value.func)
            rule = self.torch_rule(path, "init") if path and path.startswith("torch") else None
            self.flag(rule or "T1.python.module_statement", node,
                      "module-level calls are not allowed; put setup in ModelNew.__init__")
            return
        if isinstance(node, ast.Try) and try_only_reraises(node):
            for sub in node.body:
                self.scan_statement(sub)
            return
        self.flag("T1.python.module_statement", node,
                  "only imports, class/function definitions and constant assignments are allowed at module level")

    def check_foreign_assignment(self, target: ast.AST, node: ast.AST) -> None:
        """An assignment to an attribute/item of something that is not ``self`` (module-level or anywhere)."""
        root = target
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        path = self.path_of(target.value if isinstance(target, ast.Subscript) else target) if isinstance(
            target, (ast.Attribute, ast.Subscript)) else None
        if path and path.startswith(TIMER_PATHS):
            self.flag("T8.python.timer_access", node, f"assigning to `{path}` patches the timer; not allowed")
            return
        if path and path.startswith("torch"):
            rule = self.torch_rule(path, "init")
            if rule and rule.startswith("T16"):
                self.flag(rule, node, "changing global torch settings is not allowed")
                return
            self.flag("T7.python.monkeypatch", node, f"assigning to `{path}` patches torch; not allowed")
            return
        if isinstance(root, ast.Name) and root.id in self.aliases:
            self.flag("T7.python.monkeypatch", node, f"assigning into imported module `{root.id}` is not allowed")
            return
        if isinstance(root, ast.Name) and (root.id in self.classes or root.id in self.functions):
            self.flag("T7.python.monkeypatch", node, f"patching `{root.id}` after its definition is not allowed")
            return
        if isinstance(root, ast.Name) and root.id in self.constants:
            self.flag("T12.python.state_in_forward", node, f"mutating module-level `{root.id}` is not allowed")
            return
        self.flag("T1.python.module_statement", node, "this assignment target is not allowed")

    def const_kind(self, value: ast.AST, stmt: ast.AST) -> tuple[str, str | None]:
        """Kind of a module-level constant; anything but literals and arithmetic on them is refused."""
        if isinstance(value, ast.Constant):
            return make_kind(S) if isinstance(value.value, (int, float, complex)) and not isinstance(value.value, bool) else make_kind(M)
        if isinstance(value, ast.Name) and value.id in self.constants:
            return self.constants[value.id]
        if isinstance(value, (ast.BinOp, ast.UnaryOp)):
            parts = [value.left, value.right] if isinstance(value, ast.BinOp) else [value.operand]
            kinds = [self.const_kind(p, stmt) for p in parts]
            return make_kind(S) if all(k[0] == S for k in kinds) else make_kind(M)
        if isinstance(value, ast.Tuple):
            for e in value.elts:
                self.const_kind(e, stmt)
            return make_kind(M)
        if isinstance(value, (ast.List, ast.Dict, ast.Set)):
            for e in ast.iter_child_nodes(value):
                if isinstance(e, ast.expr):
                    self.const_kind(e, stmt)
            return make_kind("container")
        if isinstance(value, ast.Attribute) and value.attr == "apply" and isinstance(value.value, ast.Name) \
                and value.value.id in self.classes and self.classes[value.value.id].kind == "function":
            # softmax = SoftmaxFn.apply: its calls run the Function's forward, checked as `SoftmaxFn.apply(x)` is
            return make_kind("applyfn", value.value.id)
        path = self.path_of(value)
        if path and path.startswith("@ext."):
            return make_kind("extfn", path)  # relu = ext.relu_forward: calls through it are extension calls
        if path and path in allow.TORCH_CONSTANTS:
            return make_kind(M)
        if path and path.startswith("math."):
            return make_kind(S)
        if isinstance(value, ast.Call) and not value.keywords:
            # math.sqrt(2.0 / math.pi), float("-inf"): Python floats of constants (session 37's false-rejection hunt)
            fname = self.path_of(value.func)
            if fname and fname.startswith("math.") and all(self.const_kind(a, stmt)[0] == S for a in value.args):
                return make_kind(S)
            if isinstance(value.func, ast.Name) and value.func.id == "float" and len(value.args) == 1 and isinstance(
                    value.args[0], ast.Constant) and str(value.args[0].value).strip().lower() in {
                        "inf", "-inf", "+inf", "nan", "infinity", "-infinity"}:
                return make_kind(S)
        if isinstance(value, ast.Call):
            fpath = self.path_of(value.func)
            if fpath and fpath.startswith("torch"):
                rule = self.torch_rule(fpath, "init")
                if rule:
                    self.flag(rule, stmt, f"`{fpath}` is not allowed at module level")
                    return make_kind(U)
            if fpath and fpath.startswith("torch.utils.cpp_extension"):
                self.flag("T1.python.dynamic_code", stmt, "building extensions at import is not allowed")
                return make_kind(U)
        self.flag("T1.python.module_statement", stmt,
                  "module-level values must be literals or arithmetic on them; create tensors in ModelNew.__init__")
        return make_kind(U)

    def check_decorators(self, node: ast.FunctionDef) -> None:
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = target.id if isinstance(target, ast.Name) and target.id not in self.aliases else self.path_of(target)
            if name not in allow.ALLOWED_DECORATORS:
                rule = "T1.python.decorator"
                if name and name.startswith("torch"):
                    rule = self.torch_rule(name, "init") or rule
                self.flag(rule, dec, f"decorator not allowed; allowed: {', '.join(sorted(allow.ALLOWED_DECORATORS))}")
