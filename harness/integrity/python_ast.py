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
from cuda_agent.harness.integrity.python_class_scan import ClassScan
from cuda_agent.harness.integrity.python_function import FunctionChecker
from cuda_agent.harness.integrity.python_imports import ImportChecks
from cuda_agent.harness.integrity.python_kinds import (
    TORCH_MODULE_PREFIXES,
    ClassInfo,
    is_super_init,
    try_only_reraises,
)
from cuda_agent.harness.integrity.python_module_scan import ModuleScan
from cuda_agent.harness.integrity.violation import Violation, dedupe


class _Checker(ImportChecks, ModuleScan, ClassScan):
    """Walks one ``model_new.py`` and collects violations.

    The import rules, the module-level scan and the class scan are mixins
    (``python_imports``, ``python_module_scan``, ``python_class_scan``); the
    function bodies are checked by ``python_function.FunctionChecker``.
    """

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
            # A forward not written yet (the workspace's starter: it only raises NotImplementedError) is no
            # attempt to bypass the kernels: it fails when called, as an error, not as an integrity rejection.
            if not self.ext_called_in_forward and not _not_written_yet(model_new.methods["forward"]):
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
            elif isinstance(node, ast.Attribute) and node.attr in {"numpy", "tolist"}:
                self.flag("T1.python.tensor_method", node, f"`.{node.attr}` leaves torch for NumPy or Python objects, "
                          "whose compute no audit sees; only the extension computes")
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


def _not_written_yet(func: ast.AST) -> bool:
    """Whether a method's body is only ``raise NotImplementedError`` (with constant arguments), after an optional
    docstring: the starter's forward."""
    body = [s for s in getattr(func, "body", [])
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str))]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].cause is not None:
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Name):
        return exc.id == "NotImplementedError"
    return (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) and exc.func.id == "NotImplementedError"
            and not exc.keywords and all(isinstance(a, ast.Constant) for a in exc.args))


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
