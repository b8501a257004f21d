"""Allowlist checker for the agent's ``model_new.py`` (THREATS.md classes 1-3, 5-12, 15-16, 23).

``ModelNew.forward`` (and every helper it reaches) may only call the compiled
extension, allocate tensors, read metadata, take views and do arithmetic on
Python numbers; everything else is refused with a rule id and a line. Code
that only ``__init__`` reaches may use torch freely (weights are initialised
like the reference), but nothing anywhere may touch dynamic code, reflection,
introspection, threads, files, the OS, global flags or the task module.

The checker infers a coarse kind for every expression (Python number,
metadata, tensor, module, function...) so that ``x.size(0) * 2`` passes and
``x * 2`` does not. What it cannot prove harmless it refuses: honest
solutions need very little Python.
"""

from __future__ import annotations

import ast

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.python_function import FunctionChecker
from cuda_agent.harness.integrity.python_kinds import (
    TIMER_PATHS,
    TORCH_MODULE_PREFIXES,
    U,
    ClassInfo,
    M,
    S,
    T,
    is_main_guard,
    is_super_init,
    make_kind,
    try_only_reraises,
)
from cuda_agent.harness.integrity.violation import Violation, dedupe


class _Checker:
    """Walks one ``model_new.py`` and collects violations."""

    def __init__(self, source: str, filename: str, extension_names: tuple[str, ...]) -> None:
        self.source = source
        self.filename = filename
        self.extension_names = set(extension_names)
        self.violations: list[Violation] = []
        self.aliases: dict[str, str] = {}  # local name -> canonical path ('torch.nn', '@ext', '@ext.fn', 'math')
        self.constants: dict[str, tuple[str, str | None]] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.forward_reached: set[tuple[str | None, str]] = set()
        self.init_reached: set[tuple[str | None, str]] = set()
        self.ext_called_in_forward = False

    # ------------------------------------------------------------------ reporting
    def flag(self, rule: str, node: ast.AST | None, what: str) -> None:
        line = getattr(node, "lineno", None)
        snippet = ""
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            snippet = f"`{'class' if isinstance(node, ast.ClassDef) else 'def'} {node.name}`: "
        elif node is not None:
            seg = ast.get_source_segment(self.source, node) or ""
            seg = " ".join(seg.split())
            snippet = f"`{seg[:90]}{'...' if len(seg) > 90 else ''}`: " if seg else ""
        self.violations.append(Violation(rule=rule, message=snippet + what, file=self.filename, line=line))

    # ------------------------------------------------------------------ paths
    def path_of(self, node: ast.AST) -> str | None:
        """Canonical dotted path of a Name/Attribute chain rooted at an imported module, else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        base = self.aliases[node.id]
        return ".".join([base, *reversed(parts)])

    def torch_rule(self, path: str, mode: str) -> str | None:
        """Rule broken by referencing torch path ``path`` in ``mode`` ('forward'|'init'), or None."""
        parts = path.split(".")
        for part in parts[1:]:
            if part.startswith("__"):
                return "T1.python.reflection"
            if part.startswith("_"):
                return "T1.python.private_torch"
        for prefix, rule in allow.TORCH_REFUSED_PREFIXES:
            if path == prefix or path.startswith(prefix + ".") or (prefix.endswith("_") and path.startswith(prefix)):
                return rule
        if mode == "init":
            return None
        if path in allow.TORCH_ALLOCATION or path in allow.TORCH_CONSTANTS or path in allow.TORCH_METADATA_FUNCS:
            return None
        if path in TORCH_MODULE_PREFIXES:
            return None
        return "T1.python.torch_call"

    # ------------------------------------------------------------------ entry
    def run(self) -> list[Violation]:
        try:
            tree = ast.parse(self.source, filename=self.filename)
        except SyntaxError as exc:
            self.violations.append(
                Violation(rule="T1.python.no_model_new", message=f"cannot parse: {exc.msg}", file=self.filename,
                          line=exc.lineno)
            )
            return self.violations
        self.universal_checks(tree)
        self.scan_module(tree)
        model_new = self.classes.get("ModelNew")
        if model_new is None or model_new.kind != "modelnew":
            if model_new is None and not any(v.rule.startswith("T3.") for v in self.violations):
                self.flag("T1.python.no_model_new", None, "model_new.py must define `class ModelNew(nn.Module)`")
            return dedupe(self.violations)
        if "forward" not in model_new.methods:
            self.flag("T1.python.no_model_new", model_new.node, "ModelNew defines no forward() method")
        else:
            self.reach("forward", "ModelNew", "forward")
            if not self.ext_called_in_forward:
                self.flag("T1.python.extension_unused", model_new.methods["forward"],
                          "ModelNew.forward never calls the compiled extension "
                          f"({', '.join(sorted(self.extension_names))}.<function>(...)); the kernels must do the work")
        # Everything forward did not reach runs under the lenient __init__ rules.
        for cls in self.classes.values():
            for name in cls.methods:
                if (cls.name, name) not in self.forward_reached:
                    self.reach("init", cls.name, name)
        for name in self.functions:
            if (None, name) not in self.forward_reached:
                self.reach("init", None, name)
        return dedupe(self.violations)

    def reach(self, mode: str, cls: str | None, name: str) -> None:
        key = (cls, name)
        seen = self.forward_reached if mode == "forward" else self.init_reached
        if key in seen:
            return
        seen.add(key)
        if cls is None:
            node = self.functions.get(name)
            info = None
        else:
            info = self.classes.get(cls)
            node = info.methods.get(name) if info else None
        if node is None:
            return
        FunctionChecker(self, node, mode, info).run()

    # ------------------------------------------------------------------ whole-tree checks
    def universal_checks(self, tree: ast.Module) -> None:
        """Rules that hold for every line, reached or not."""
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.check_import(node)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr.endswith("__"):
                if not is_super_init(node):
                    self.flag("T1.python.reflection", node, f"dunder attribute `{node.attr}` is not allowed")
            elif isinstance(node, ast.Attribute) and node.attr in {"f_back", "f_locals", "f_globals", "tb_frame",
                                                                   "gi_frame", "cr_frame", "f_code", "_getframe"}:
                self.flag("T6.python.introspection", node, "frame objects are not allowed")
            elif isinstance(node, ast.Name) and node.id in {"__builtins__", "__import__", "__loader__", "__spec__",
                                                             "__dict__", "__file__", "__cached__", "__package__"}:
                rule = "T12.python.file_io" if node.id == "__file__" else "T1.python.reflection"
                self.flag(rule, node, f"`{node.id}` is not allowed")
            elif isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
                self.flag("T11.python.lazy_output", node, "generators/coroutines are not allowed; return tensors")
            elif isinstance(node, ast.AsyncFunctionDef):
                self.flag("T11.python.lazy_output", node, "async functions are not allowed")
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.flag("T12.python.state_in_forward", node, "global/nonlocal state is not allowed")
            elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                if not try_only_reraises(node):
                    self.flag("T2.python.try_fallback", node,
                              "try/except/finally can fall back to other code; only handlers whose body is `raise` are allowed")
            elif isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
                self.flag("T3.python.alias_reference", node, "the reference `Model` must not be used in model_new.py")

    def check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.check_module_import(node, alias.name)
            return
        if node.level:
            names = [a.name for a in node.names]
            rule = "T3.python.import_task" if (node.module or "").split(".")[0] == "model" or "model" in names \
                else "T1.python.import_not_allowed"
            self.flag(rule, node, "relative imports are not allowed (the workspace holds only model_new.py and the extension)")
            return
        module = node.module or ""
        if not self.check_module_import(node, module):
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self.flag("T1.python.reflection", node, "star imports are not allowed; import names explicitly")
            elif module in self.extension_names:
                continue
            elif module == "torch" and alias.name not in allow.TORCH_IMPORTABLE:
                rule = self.torch_rule(full, "forward") or "T1.python.torch_call"
                if full in allow.TORCH_ALLOCATION or full in allow.TORCH_CONSTANTS or full in allow.TORCH_METADATA_FUNCS:
                    continue
                self.flag(rule, node, f"`from torch import {alias.name}` is not allowed; write `torch.<name>` so it can be checked")
            elif module.startswith("torch.") and full != "torch.nn.functional" and module != "torch.nn":
                self.flag(self.torch_rule(full, "forward") or "T1.python.torch_call", node,
                          f"importing `{full}` is not allowed")
            elif module == "torch.nn" and alias.name not in {"Module", "Parameter", "functional", "init"} \
                    and not alias.name[0].isupper():
                self.flag("T1.python.torch_call", node, f"importing `{full}` is not allowed")

    def check_module_import(self, node: ast.AST, module: str) -> bool:
        if module in self.extension_names or module in allow.ALLOWED_IMPORTS:
            return True
        for prefix, rule in allow.IMPORT_RULES:
            if module == prefix or module.startswith(prefix + "."):
                self.flag(rule, node, f"importing `{module}` is not allowed")
                return False
        if module.startswith("torch."):
            self.flag(self.torch_rule(module, "forward") or "T1.python.import_not_allowed", node,
                      f"importing `{module}` is not allowed")
            return False
        allowed = ", ".join(sorted(allow.ALLOWED_IMPORTS | self.extension_names))
        self.flag("T1.python.import_not_allowed", node, f"importing `{module}` is not allowed; allowed: {allowed}")
        return False

    # ------------------------------------------------------------------ module scan
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
        path = self.path_of(value)
        if path and path in allow.TORCH_CONSTANTS:
            return make_kind(M)
        if path and path.startswith("math."):
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
        params = {a.arg for a in init.args.args[1:] + init.args.kwonlyargs}
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
        if isinstance(value, ast.Tuple):
            return make_kind(M)
        if isinstance(value, ast.Call):
            path = self.path_of(value.func)
            if isinstance(value.func, ast.Name) and value.func.id in self.classes:
                return make_kind("hmodule", value.func.id)
            if isinstance(value.func, ast.Name) and value.func.id in {"int", "float", "bool", "len", "abs", "round"}:
                return make_kind(S)
            if path:
                if path.startswith("math."):
                    return make_kind(S)
                if path.startswith("torch.nn.") and path.split(".")[2][:1].isupper() and path != "torch.nn.Parameter":
                    return make_kind("tmodule", path)
                return make_kind(T)
            return make_kind(T)
        return make_kind(U)


def check_model_new_source(
    source: str,
    filename: str = "model_new.py",
    *,
    extension_names: tuple[str, ...] = allow.DEFAULT_EXTENSION_NAMES,
) -> list[Violation]:
    """Violations of the ``model_new.py`` allowlist in ``source`` (empty list = accepted).

    :param source: the file's text.
    :param filename: name used in violations (workspace-relative).
    :param extension_names: module names of the compiled extension (``cuda_extension``).
    :returns: one ``Violation`` per broken rule and line, in source order of discovery.
    """
    return _Checker(source, filename, tuple(extension_names)).run()
