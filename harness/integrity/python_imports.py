"""Import rules of the ``model_new.py`` checker: which modules and names ``model_new.py`` may import.

A mixin of ``python_ast._Checker``: ``import x`` / ``from x import y`` are
checked against ``python_allowlist`` (the extension, torch, math...); relative
imports, star imports and ``from torch import <compute>`` are refused.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cuda_agent.harness.integrity import python_allowlist as allow


class ImportChecks:
    """Checks of import statements; mixed into ``python_ast._Checker``."""

    extension_names: set[str]

    if TYPE_CHECKING:
        def flag(self, rule: str, node: ast.AST | None, what: str) -> None: ...
        def torch_rule(self, path: str, mode: str) -> str | None: ...

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
