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
from dataclasses import dataclass, field

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.violation import Violation, dedupe

# Expression kinds (tags). Values are (tag, ref) tuples.
S, M, T, U, P = "S", "M", "T", "U", "P"  # scalar, metadata, tensor, unknown, data pointer
NON_COMPUTE = {S, M, P, "list", "builtin"}
_CALLABLE_TAGS = {"torchfn", "helperfn", "method", "tmodule", "hmodule", "lambda", "mod", "extfn", "helpercls", "mathfn"}
_TIMER_PATHS = ("torch.cuda.Event", "torch.cuda.synchronize", "torch.cuda.Stream", "torch.profiler",
                "torch.autograd.profiler", "torch.cuda.current_stream", "torch.cuda.Event.elapsed_time")
_METHOD_RECEIVERS = {T, U, M, S, P, "list", "container", "ctx", "tmodule", "X"}
_MUTATING_CONTAINER_METHODS = {"append", "extend", "insert", "pop", "update", "setdefault", "clear", "add", "remove",
                               "popitem", "discard", "__setitem__"}


def _k(tag: str, ref: str | None = None) -> tuple[str, str | None]:
    return (tag, ref)


@dataclass
class _ClassInfo:
    """What the module scan learned about one class definition."""

    name: str
    node: ast.ClassDef
    kind: str  # "modelnew" | "module" | "function" | "other"
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)
    attrs: dict[str, tuple[str, str | None]] = field(default_factory=dict)


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
        self.classes: dict[str, _ClassInfo] = {}
        self.forward_reached: set[tuple[str | None, str]] = set()
        self.init_reached: set[tuple[str | None, str]] = set()
        self.ext_called_in_forward = False

    # ------------------------------------------------------------------ reporting
    def flag(self, rule: str, node: ast.AST | None, what: str) -> None:
        line = getattr(node, "lineno", None)
        snippet = ""
        if node is not None:
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
        if path in _TORCH_MODULE_PREFIXES:
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
        _FunctionChecker(self, node, mode, info).run()

    # ------------------------------------------------------------------ whole-tree checks
    def universal_checks(self, tree: ast.Module) -> None:
        """Rules that hold for every line, reached or not."""
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.check_import(node)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr.endswith("__"):
                if not _is_super_init(node):
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
                if not _try_only_reraises(node):
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
            top_level.extend(node.body if isinstance(node, ast.Try) and _try_only_reraises(node) else [node])
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
                    self.constants[target.id] = self.const_kind(node.value, node) if node.value is not None else _k(U)
                else:
                    self.check_foreign_assignment(target, node)
            return
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            return  # never runs when imported as a module
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            path = self.path_of(node.value.func)
            rule = self.torch_rule(path, "init") if path and path.startswith("torch") else None
            self.flag(rule or "T1.python.module_statement", node,
                      "module-level calls are not allowed; put setup in ModelNew.__init__")
            return
        if isinstance(node, ast.Try) and _try_only_reraises(node):
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
        if path and path.startswith(_TIMER_PATHS):
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
            return _k(S) if isinstance(value.value, (int, float, complex)) and not isinstance(value.value, bool) else _k(M)
        if isinstance(value, ast.Name) and value.id in self.constants:
            return self.constants[value.id]
        if isinstance(value, (ast.BinOp, ast.UnaryOp)):
            parts = [value.left, value.right] if isinstance(value, ast.BinOp) else [value.operand]
            kinds = [self.const_kind(p, stmt) for p in parts]
            return _k(S) if all(k[0] == S for k in kinds) else _k(M)
        if isinstance(value, ast.Tuple):
            for e in value.elts:
                self.const_kind(e, stmt)
            return _k(M)
        if isinstance(value, (ast.List, ast.Dict, ast.Set)):
            for e in ast.iter_child_nodes(value):
                if isinstance(e, ast.expr):
                    self.const_kind(e, stmt)
            return _k("container")
        path = self.path_of(value)
        if path and path in allow.TORCH_CONSTANTS:
            return _k(M)
        if path and path.startswith("math."):
            return _k(S)
        if isinstance(value, ast.Call):
            fpath = self.path_of(value.func)
            if fpath and fpath.startswith("torch"):
                rule = self.torch_rule(fpath, "init")
                if rule:
                    self.flag(rule, stmt, f"`{fpath}` is not allowed at module level")
                    return _k(U)
            if fpath and fpath.startswith("torch.utils.cpp_extension"):
                self.flag("T1.python.dynamic_code", stmt, "building extensions at import is not allowed")
                return _k(U)
        self.flag("T1.python.module_statement", stmt,
                  "module-level values must be literals or arithmetic on them; create tensors in ModelNew.__init__")
        return _k(U)

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
        info = _ClassInfo(node.name, node, kind)
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
                        attrs[target.attr] = self.init_value_kind(node.value, params)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute) and node.value is not None:
                attrs[node.target.attr] = self.init_value_kind(node.value, params)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in {"register_buffer", "register_parameter"} and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                attrs[node.args[0].value] = _k(T)
        return attrs

    def init_value_kind(self, value: ast.AST, params: set[str]) -> tuple[str, str | None]:
        if isinstance(value, ast.Constant):
            return _k(S) if isinstance(value.value, (int, float)) and not isinstance(value.value, bool) else _k(M)
        if isinstance(value, ast.Name):
            if value.id in params:
                return _k(S)
            return self.constants.get(value.id, _k(U))
        if isinstance(value, ast.BinOp):
            kinds = {self.init_value_kind(value.left, params)[0], self.init_value_kind(value.right, params)[0]}
            return _k(S) if kinds <= {S} else _k(U)
        if isinstance(value, ast.UnaryOp):
            return self.init_value_kind(value.operand, params)
        if isinstance(value, ast.Tuple):
            return _k(M)
        if isinstance(value, ast.Call):
            path = self.path_of(value.func)
            if isinstance(value.func, ast.Name) and value.func.id in self.classes:
                return _k("hmodule", value.func.id)
            if isinstance(value.func, ast.Name) and value.func.id in {"int", "float", "bool", "len", "abs", "round"}:
                return _k(S)
            if path:
                if path.startswith("math."):
                    return _k(S)
                if path.startswith("torch.nn.") and path.split(".")[2][:1].isupper() and path != "torch.nn.Parameter":
                    return _k("tmodule", path)
                return _k(T)
            return _k(T)
        return _k(U)


class _FunctionChecker:
    """Checks one function body under 'forward' (strict allowlist) or 'init' (lenient) rules."""

    def __init__(self, top: _Checker, node: ast.FunctionDef, mode: str, cls: _ClassInfo | None) -> None:
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
                self.env[a.arg] = _k("self")
            elif i == 0 and cls is not None and cls.kind == "function" and is_static:
                self.env[a.arg] = _k("ctx")
            elif mode == "init" and node.name == "__init__":
                self.env[a.arg] = _k(S)
            else:
                self.env[a.arg] = _k(T)
                self.input_names.add(a.arg)
        for extra in (node.args.vararg, node.args.kwarg):
            if extra is not None:
                self.env[extra.arg] = _k("list")
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
            kind = self.expr(node.value) if node.value is not None else _k(U)
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
            self.env[node.name] = _k("lambda")
            sub = _FunctionChecker(self.top, node, self.mode, None)
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
            elt_kind = _k(S) if kind[0] in {M, S} else (_k(T) if kind[0] == T else _k(U))
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for i, elt in enumerate(target.elts):
                if values is not None:
                    self.assign(elt, self.silent_kind(values[i]), values[i], stmt)
                else:
                    self.assign(elt.value if isinstance(elt, ast.Starred) else elt,
                                _k("list") if isinstance(elt, ast.Starred) else elt_kind, None, stmt)
            return
        if isinstance(target, ast.Starred):
            self.assign(target.value, _k("list"), None, stmt)
            return
        root = target
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        root_kind = self.env.get(root.id) if isinstance(root, ast.Name) else None
        if root_kind and root_kind[0] == "self":
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
            current = self.env.get(node.target.id, _k(U))
            if node.target.id in self.input_names and current[0] in {T, U}:
                self.flag("T5.python.input_mutation", node, "in-place arithmetic on an input is not allowed")
                return
            if self.strict and (current[0] not in NON_COMPUTE or value[0] not in NON_COMPUTE):
                self.flag("T1.python.operator", node, "arithmetic on tensors runs PyTorch compute; do it in the extension")
            return
        self.assign(node.target, _k(U), None, node)
        if self.strict and isinstance(node.target, ast.Subscript) and value[0] not in NON_COMPUTE:
            self.flag("T1.python.operator", node, "in-place arithmetic on tensors runs PyTorch compute")

    def iter_kind(self, node: ast.AST) -> tuple[str, str | None]:
        kind = self.expr(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            return _k(S)
        if kind[0] in {M, S}:
            return _k(S)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"enumerate", "zip"}:
            return _k(U)
        return _k(T) if kind[0] == T else _k(U)

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
            return _k(M)
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)
        return _k(U)

    def e_Constant(self, node: ast.Constant) -> tuple[str, str | None]:
        v = node.value
        return _k(S) if isinstance(v, (int, float, complex)) and not isinstance(v, bool) else _k(M)

    def e_JoinedStr(self, node: ast.JoinedStr) -> tuple[str, str | None]:
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                kind = self.expr(v.value)
                if self.strict and kind[0] in {T, U}:
                    self.flag("T1.python.operator", v, "formatting a tensor runs PyTorch compute")
        return _k(M)

    def e_Name(self, node: ast.Name) -> tuple[str, str | None]:
        name = node.id
        if name in self.env:
            return self.env[name]
        if name in self.top.aliases:
            path = self.top.aliases[name]
            if path.startswith("@ext"):
                return _k("ext") if path == "@ext" else _k("extfn", path)
            if path.startswith("torch"):
                rule = self.top.torch_rule(path, self.mode)
                if rule:
                    self.flag(rule, node, f"`{path}` is not allowed here")
                    return _k("X")
                return self.torch_kind(path)
            if path.startswith("math"):
                return _k("mod", path) if path == "math" else _k("mathfn", path)
            return _k("mod", path)
        if name in self.top.constants:
            return self.top.constants[name]
        if name in self.top.functions:
            return _k("helperfn", name)
        if name in self.top.classes:
            return _k("helpercls", name)
        if name in allow.BUILTINS_ALLOWED or name in allow.BUILTINS_NUMERIC or name in allow.BUILTIN_RULES \
                or name in {"print", "True", "False", "None", "NotImplemented", "Ellipsis"}:
            return _k("builtin", name)
        return _k(U)

    def torch_kind(self, path: str) -> tuple[str, str | None]:
        if path in allow.TORCH_CONSTANTS:
            return _k(M)
        if path in _TORCH_MODULE_PREFIXES or path == "torch":
            return _k("mod", path)
        return _k("torchfn", path)

    def e_Attribute(self, node: ast.Attribute) -> tuple[str, str | None]:
        attr = node.attr
        path = self.top.path_of(node)
        if path is not None:
            if path.startswith("@ext"):
                return _k("extfn", path)
            if path.startswith("torch"):
                rule = self.top.torch_rule(path, self.mode)
                if rule:
                    self.flag(rule, node, self.torch_message(path, rule))
                    return _k("X")
                return self.torch_kind(path)
            if path.startswith("math."):
                return _k("mathfn", path)
        return self.attr_kind(node, self.expr(node.value))

    def attr_kind(self, node: ast.Attribute, recv: tuple[str, str | None]) -> tuple[str, str | None]:
        """Kind of ``<recv>.<attr>`` where the receiver's kind is known."""
        attr = node.attr
        tag = recv[0]
        if attr.startswith("__") or tag == "X":
            return _k("X")  # dunders are reported by the universal pass
        if tag == "self":
            if self.cls is not None and attr in self.cls.methods:
                return _k("method", attr)
            if self.cls is not None and attr in self.cls.attrs:
                return self.cls.attrs[attr]
            if attr == "training":
                return _k(M)
            return _k(U)
        if tag in {T, U}:
            if attr in allow.TENSOR_METADATA_ATTRS:
                return _k(M) if attr in {"shape", "dtype", "device", "layout", "names"} or attr.startswith("is_") \
                    or attr == "requires_grad" else _k(S)
            if attr in allow.TENSOR_VIEW_ATTRS:
                return _k(T)
            if self.strict:
                rule = "T1.python.private_torch" if attr.startswith("_") else "T1.python.tensor_method"
                self.flag(rule, node, f"tensor attribute `.{attr}` is not on the metadata allowlist "
                          f"({', '.join(sorted(allow.TENSOR_METADATA_ATTRS | allow.TENSOR_VIEW_ATTRS))})")
            return _k(U)
        if tag == "tmodule":
            if attr.startswith("_"):
                self.flag("T1.python.reflection", node, "private attributes of torch modules are not allowed")
                return _k(U)
            return _k(T) if ("weight" in attr or "bias" in attr or attr.startswith("running_")) else _k(M)
        if tag in {M, S, P}:
            if attr.startswith("_") and self.strict:
                self.flag("T1.python.reflection", node, "private attributes are not allowed")
            return _k(M)
        if tag == "helpercls":
            return _k("applyfn", recv[1]) if attr == "apply" else _k(U)
        if tag == "ctx":
            if self.strict and attr not in allow.AUTOGRAD_CTX_ATTRS:
                self.flag("T1.python.tensor_method", node, f"ctx.{attr} is not allowed")
            return _k("ctxattr", attr) if attr in allow.AUTOGRAD_CTX_ATTRS else _k(U)
        if tag == "container" and self.strict:
            return _k("containerattr", attr)
        return _k(U)

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
            return _k(S) if single_int else _k(M)
        if recv[0] == "container":
            return _k(U)
        if recv[0] == "list":
            return _k(U)
        return _k(T) if recv[0] == T else _k(U)

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
            return _k(T)
        if left[0] in NON_COMPUTE and right[0] in NON_COMPUTE:
            return _k(S) if left[0] == S and right[0] == S else _k(M)
        if self.strict:
            self.flag("T1.python.operator", node,
                      "arithmetic on tensors runs PyTorch compute; only Python numbers (sizes, strides) may be combined")
        return _k(T)

    def e_UnaryOp(self, node: ast.UnaryOp) -> tuple[str, str | None]:
        kind = self.expr(node.operand)
        if kind[0] in NON_COMPUTE:
            return kind if kind[0] == S else _k(M)
        if self.strict:
            self.flag("T1.python.operator", node, "unary operators on tensors run PyTorch compute")
        return _k(T)

    def e_BoolOp(self, node: ast.BoolOp) -> tuple[str, str | None]:
        kinds = [self.expr(v) for v in node.values]
        if self.strict and any(k[0] in {T, U} for k in kinds[:-1]):
            self.flag("T1.python.operator", node, "the truth value of a tensor runs PyTorch compute")
        return kinds[-1] if len({k[0] for k in kinds}) == 1 else _k(U)

    def e_Compare(self, node: ast.Compare) -> tuple[str, str | None]:
        kinds = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        identity = all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
        if any(k[0] == P for k in kinds):
            self.flag("T12.python.cache_key", node, "comparing data_ptr() values is a cache check; not allowed")
        elif self.strict and not identity and any(k[0] not in NON_COMPUTE for k in kinds):
            self.flag("T1.python.operator", node, "comparing tensors runs PyTorch compute")
        return _k(M)

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
        return kinds[0] if kinds[0] == kinds[1] else _k(U)

    def e_Tuple(self, node: ast.Tuple | ast.List) -> tuple[str, str | None]:
        kinds = [self.expr(e) for e in node.elts]
        if isinstance(node, ast.Tuple) and all(k[0] in {S, M} for k in kinds):
            return _k(M)
        return _k("list", T) if any(k[0] in {T, U} or k == ("list", T) for k in kinds) else _k("list")

    e_List = e_Tuple

    def e_Dict(self, node: ast.Dict) -> tuple[str, str | None]:
        for k in node.keys:
            if k is not None and self.expr(k)[0] == P:
                self.flag("T12.python.cache_key", k, "keying by data_ptr() is a cache; not allowed")
        for v in node.values:
            self.expr(v)
        return _k("list")

    def e_Set(self, node: ast.Set) -> tuple[str, str | None]:
        for e in node.elts:
            self.expr(e)
        return _k("list")

    def e_Starred(self, node: ast.Starred) -> tuple[str, str | None]:
        return self.expr(node.value)

    def e_NamedExpr(self, node: ast.NamedExpr) -> tuple[str, str | None]:
        kind = self.expr(node.value)
        self.env[node.target.id] = kind
        return kind

    def e_Lambda(self, node: ast.Lambda) -> tuple[str, str | None]:
        saved = dict(self.env)
        for a in node.args.args:
            self.env[a.arg] = _k(U)
        self.expr(node.body)
        self.env = saved
        return _k("lambda")

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
        return _k("list")

    def e_ListComp(self, node: ast.ListComp) -> tuple[str, str | None]:
        return self.comprehension(node, [node.elt])

    e_SetComp = e_ListComp
    e_GeneratorExp = e_ListComp

    def e_DictComp(self, node: ast.DictComp) -> tuple[str, str | None]:
        return self.comprehension(node, [node.key, node.value])

    # ------------------------------------------------------------------ calls
    def e_Call(self, node: ast.Call) -> tuple[str, str | None]:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and func.id not in self.env:
            return self.call_getattr(node)
        recv: tuple[str, str | None] | None = None
        if isinstance(func, ast.Attribute) and self.top.path_of(func) is None:
            recv = self.expr(func.value)
            if recv[0] in _METHOD_RECEIVERS:
                arg_kinds = [self.expr(a) for a in node.args] + [self.expr(k.value) for k in node.keywords]
                return self.call_method(node, func, recv, arg_kinds)
            fkind = self.attr_kind(func, recv)
        else:
            fkind = self.expr(func)
        tag, ref = fkind
        arg_kinds = [self.expr(a) for a in node.args] + [self.expr(k.value) for k in node.keywords]
        if tag == "X":
            return _k("X")
        if tag == "extfn":
            self.ext_called = True
            for a, k in zip(list(node.args) + [kw.value for kw in node.keywords], arg_kinds, strict=True):
                if k[0] in _CALLABLE_TAGS:
                    self.flag("T1.python.submodule_call", a,
                              "passing modules or functions to the extension is not allowed; pass tensors and numbers")
            return _k(T)
        if tag == "torchfn":
            return self.call_torch(node, ref or "", arg_kinds)
        if tag == "mathfn":
            if self.strict and any(k[0] not in NON_COMPUTE for k in arg_kinds):
                self.flag("T1.python.operator", node, "math functions on tensors run PyTorch compute")
            return _k(S)
        if tag == "builtin":
            return self.call_builtin(node, ref or "", arg_kinds)
        if tag == "method":
            self.top.reach(self.mode, self.cls.name if self.cls else None, ref or "")
            if self.mode == "forward":
                self.ext_called |= self.top.ext_called_in_forward
            return _k(U)
        if tag == "helperfn":
            self.top.reach(self.mode, None, ref or "")
            return _k(U)
        if tag == "helpercls":
            info = self.top.classes.get(ref or "")
            if info is not None and info.kind == "module":
                self.top.reach(self.mode, ref, "__init__")
            return _k("hmodule", ref)
        if tag == "applyfn":
            self.top.reach(self.mode, ref, "forward")
            self.ext_called |= self.top.ext_called_in_forward
            return _k(U)
        if tag == "hmodule":
            self.top.reach(self.mode, ref, "forward")
            self.ext_called |= self.top.ext_called_in_forward
            return _k(U)
        if tag == "lambda":
            return _k(U)
        if tag == "tmodule":
            if self.strict:
                self.flag("T1.python.submodule_call", node,
                          "calling a torch.nn module runs PyTorch compute; pass its weights to the extension instead")
            return _k(T)
        if tag in {"ctxattr"}:
            return _k(U)
        if isinstance(func, ast.Attribute) and recv is not None:
            return self.call_method(node, func, recv, arg_kinds)
        if self.strict:
            self.flag("T1.python.submodule_call", node,
                      "forward may call only the extension, allowed torch allocation/metadata functions, "
                      "its own helpers and allowed builtins")
        return _k(U)

    def call_getattr(self, node: ast.Call) -> tuple[str, str | None]:
        if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            name = node.args[1].value
            if not name.isidentifier():
                self.flag("T1.python.reflection", node, "getattr with a non-identifier name")
                return _k(U)
            synthetic = ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load())
            ast.copy_location(synthetic, node)
            synthetic.end_lineno, synthetic.end_col_offset = node.end_lineno, node.end_col_offset
            if name.startswith("__"):
                self.flag("T1.python.reflection", node, f"getattr of dunder `{name}` is not allowed")
                return _k(U)
            for extra in node.args[2:]:
                self.expr(extra)
            return self.e_Attribute(synthetic)
        self.flag("T1.python.reflection", node,
                  "getattr with a computed name hides what is called; write the attribute name literally")
        for a in node.args:
            self.expr(a)
        return _k("X")

    def call_torch(self, node: ast.Call, path: str, arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        if self.mode == "init":
            if path.startswith("torch.nn.") and path.split(".")[2][:1].isupper() and path != "torch.nn.Parameter":
                return _k("tmodule", path)
            return _k(T)
        if path in allow.TORCH_ALLOCATION:
            return _k(T)
        if path in {"torch.cuda.current_device", "torch.cuda.device_count", "torch.numel"}:
            return _k(S)
        if path == "torch.nn.Parameter" or path == "torch.nn.Module":
            self.flag("T12.python.state_in_forward", node, f"`{path}` in forward is not allowed")
            return _k(T)
        return _k(M)

    def call_builtin(self, node: ast.Call, name: str, arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        if name in allow.BUILTIN_RULES:
            rule = allow.BUILTIN_RULES[name]
            if name == "super" and not self.strict:
                return _k("self")
            if name == "setattr" and not self.strict and node.args and isinstance(node.args[0], ast.Name) \
                    and self.env.get(node.args[0].id, _k(U))[0] == "self" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant):
                return _k(M)
            if rule.startswith("T12.python.state") and not self.strict:
                rule = "T1.python.reflection"
            if rule == "T12.python.cache_key" and not self.strict:
                return _k(S)
            self.flag(rule, node, f"`{name}()` is not allowed")
            return _k(U)
        if name in allow.BUILTINS_NUMERIC:
            if self.strict and any(k[0] not in NON_COMPUTE or k == ("list", T) for k in arg_kinds):
                self.flag("T1.python.builtin_call", node,
                          f"`{name}()` on a tensor runs PyTorch compute; use it on Python numbers only")
            return _k(S) if name not in {"sorted"} else _k("list")
        if name in allow.BUILTINS_ALLOWED:
            if name == "len":
                return _k(S)
            if name in {"list", "tuple", "dict", "enumerate", "zip", "map", "filter", "reversed"}:
                return _k("list") if name != "tuple" or any(k[0] not in {S, M} for k in arg_kinds) else _k(M)
            return _k(M)
        if self.strict:
            self.flag("T1.python.builtin_call", node,
                      f"`{name}()` is not on the builtin allowlist ({', '.join(sorted(allow.BUILTINS_ALLOWED))})")
        return _k(U)

    def call_method(self, node: ast.Call, func: ast.Attribute, recv: tuple[str, str | None],
                    arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        name = func.attr
        tag = recv[0]
        if tag == "X" or name.startswith("__"):
            return _k("X")
        if tag == "self":
            if name in {"register_buffer", "register_parameter", "add_module", "register_module"}:
                if self.strict:
                    self.flag("T12.python.state_in_forward", node, f"self.{name}() in forward stores state")
                return _k(M)
            if self.strict:
                self.flag("T1.python.submodule_call", node, f"self.{name}(...) is not a method of this class")
            return _k(U)
        if tag == "tmodule":
            if self.strict:
                self.flag("T1.python.submodule_call", node,
                          "calling a torch.nn module runs PyTorch compute; pass its weights to the extension instead")
            return _k(T)
        if tag == "container":
            if name in _MUTATING_CONTAINER_METHODS:
                self.flag("T12.python.state_in_forward", node, "mutating a module-level container keeps state across calls")
            return _k(U)
        if tag == "list":
            if self.strict and name not in allow.LIST_METHODS:
                self.flag("T1.python.tensor_method", node, f"list method `.{name}()` is not allowed")
            return _k(U)
        if tag in {M, S, P}:
            if self.strict and name.startswith("_"):
                self.flag("T1.python.reflection", node, "private methods are not allowed")
            return _k(S) if name in {"numel", "bit_length", "index", "count"} else _k(M)
        if tag == "ctx" and name in allow.AUTOGRAD_CTX_ATTRS:
            return _k(M)
        if tag in {T, U}:
            return self.tensor_method(node, func, name, arg_kinds)
        if self.strict:
            self.flag("T1.python.submodule_call", node, f"calling `.{name}()` on this object is not allowed")
        return _k(U)

    def tensor_method(self, node: ast.Call, func: ast.Attribute, name: str,
                      arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        root_input = self.root_is_input(func.value)
        if root_input and name.endswith("_") and not name.endswith("__"):
            self.flag("T5.python.input_mutation", node, f"`.{name}()` modifies an input in place")
            return _k(T)
        if not self.strict:
            return _k(T)
        if name in allow.TENSOR_METADATA_METHODS:
            if name == "data_ptr":
                return _k(P)
            if name in {"size", "stride"} and not node.args:
                return _k(M)
            return _k(M) if name.startswith("is_") else _k(S)
        if name in allow.TENSOR_CAST_METHODS:
            self.flag("T15.python.dtype_cast", node, "casting tensors in forward changes the computed precision")
            return _k(T)
        if name == "to":
            if self.to_casts(node, arg_kinds):
                self.flag("T15.python.dtype_cast", node, "`.to(dtype)` in forward changes the computed precision; "
                          "only device moves are allowed")
            return _k(T)
        if name in allow.TENSOR_VIEW_METHODS:
            return _k("list") if name in {"unbind", "split", "chunk"} else _k(T)
        rule = "T1.python.private_torch" if name.startswith("_") else "T1.python.tensor_method"
        self.flag(rule, node, f"tensor method `.{name}()` computes with PyTorch; allowed methods: metadata "
                  f"({', '.join(sorted(allow.TENSOR_METADATA_METHODS))}) and views/allocation "
                  f"({', '.join(sorted(allow.TENSOR_VIEW_METHODS))})")
        return _k(T)

    def to_casts(self, node: ast.Call, arg_kinds: list[tuple[str, str | None]]) -> bool:
        if any(k.arg == "dtype" for k in node.keywords):
            return True
        for a in node.args:
            if isinstance(a, ast.Attribute) and a.attr == "dtype":
                return True
            path = self.top.path_of(a)
            if path in allow.TORCH_CONSTANTS and path not in {"torch.device", "torch.contiguous_format",
                                                               "torch.channels_last", "torch.preserve_format"}:
                return True
            if isinstance(a, ast.Name) and self.env.get(a.id, _k(U))[0] in {T, U} and a.id not in {"device"}:
                return True
        return False


def _is_super_init(node: ast.Attribute) -> bool:
    return (node.attr == "__init__" and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "super")


def _is_main_guard(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _try_only_reraises(node: ast.AST) -> bool:
    """True when every handler only raises and there is no else/finally: no fallback path exists."""
    if getattr(node, "orelse", None) or getattr(node, "finalbody", None):
        return False
    handlers = getattr(node, "handlers", [])
    return bool(handlers) and all(all(isinstance(s, ast.Raise) for s in h.body) for h in handlers)


def _module_prefixes() -> frozenset[str]:
    out: set[str] = set()
    for path in allow.TORCH_ALLOCATION | allow.TORCH_CONSTANTS | allow.TORCH_METADATA_FUNCS:
        parts = path.split(".")
        for i in range(1, len(parts)):
            out.add(".".join(parts[:i]))
    out.add("torch.nn.functional")  # the module object itself; any attribute of it is refused
    out.add("torch.nn.init")
    return frozenset(out)


_TORCH_MODULE_PREFIXES = _module_prefixes()


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
