"""Dependency rules of DESIGN.md, checked by an AST walk of the tree, and the docs of the interfaces.

- core/ imports no other folder, neither by ``import`` statement nor by string: every call of
  ``importlib.import_module``/``__import__`` with a literal name and every string literal that spells a dotted
  ``cuda_agent...`` module counts as an import (a string import is a static import in disguise); what core needs
  from other folders comes through hooks (``register_commands``, ``register_skills``, ``doctor_checks``, the
  component hooks) or protocols. The one exception: the plugin manager names the package of its built-ins;
- harness/ and training/ never import plugins/; harness/ never imports training/;
- plugins/ never import another (public) plugin module;
- no folder imports another folder's private (``_name``) modules or names;
- no import cycles among module-level imports.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"core": "cuda_agent", "plugins": "cuda_agent.plugins", "skills": "cuda_agent.skills",
           "harness": "cuda_agent.harness", "training": "cuda_agent.training"}
ALLOWED = {
    "core": {"core"},
    "harness": {"core", "harness", "skills"},
    "training": {"core", "harness", "training", "skills"},
    "plugins": {"core", "harness", "training", "skills", "plugins"},
    "skills": {"core", "skills"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    folder = rel.parts[0]
    parts = [*FOLDERS[folder].split("."), *rel.with_suffix("").parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


#: String literals naming another folder that a module may hold (the designed exceptions).
ALLOWED_STRINGS = {("core/plugin_manager.py", "cuda_agent.plugins")}  # built-ins are listed by module name

#: Imports of another folder's private modules that remain until the harness exposes a public API for them
#: (issue 23: the engineer splitting the harness adds it). This list may only shrink: a new entry fails.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()  # all fixed: plugins/ and training/ use cuda_agent.harness's API

MODULE_PATH = re.compile(r"cuda_agent(\.[A-Za-z_][A-Za-z0-9_]*)+|cuda_agent")
IMPORT_CALLS = {"import_module", "__import__", "find_spec"}


def folder_of(module: str) -> str | None:
    if module != "cuda_agent" and not module.startswith("cuda_agent."):
        return None
    for folder, prefix in sorted(FOLDERS.items(), key=lambda kv: -len(kv[1])):
        if module == prefix or module.startswith(prefix + "."):
            return folder
    return "core"


def sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield folder, path


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def string_imports(source: str, literals: bool = True) -> list[tuple[str, int]]:
    """(module, line) of every import by string: import calls with a literal name, and (``literals``) every string
    literal spelling a module path outside docstrings (in core, which may hold no such string at all)."""
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in IMPORT_CALLS and node.args:
                arg = node.args[0]
                text = arg.value if isinstance(arg, ast.Constant) else None
                if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                    text = str(arg.values[0].value).rstrip(".")  # f"cuda_agent.harness.{name}": its literal head
                if isinstance(text, str) and text.startswith("cuda_agent"):
                    found.append((text, node.lineno))
        elif literals and isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if MODULE_PATH.fullmatch(node.value) and node.value != "cuda_agent":
                found.append((node.value, node.lineno))
    return sorted(set(found), key=lambda x: (x[1], x[0]))


def packages() -> set[str]:
    return {module_name(p) for _, p in sources() if p.name == "__init__.py"}


def private_owner(target: str, pkgs: set[str]) -> str | None:
    """The package owning the first private (``_name``) part of ``target``; None when nothing in it is private."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:i])
            return owner if owner in pkgs else owner.rpartition(".")[0]
    return None


def layering_problems(folder: str, rel: str, module: str, source: str, static_imports, pkgs: set[str]) -> list[str]:
    """Every broken rule of one module: its static imports (target, line) and its imports by string."""
    problems = []
    package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
    by_string = [(t, line, "by string ") for t, line in string_imports(source, literals=folder == "core")
                 if (rel, t) not in ALLOWED_STRINGS]
    for target, line, how in [*((t, n, "") for t, n in static_imports), *by_string]:
        target_folder = folder_of(target)
        if target_folder is None:
            continue
        if target_folder not in ALLOWED[folder]:
            problems.append(f"{rel}:{line}: {folder}/ imports {how}{target} ({target_folder}/)")
        owner = private_owner(target, pkgs)
        known = any(r == rel and (target == t or target.startswith(t + ".")) for r, t in KNOWN_PRIVATE_IMPORTS)
        if owner is not None and not (package == owner or package.startswith(owner + ".")) and not known:
            problems.append(f"{rel}:{line}: {module} imports {how}{target}, a private part of {owner}")
        if folder == "plugins" and target_folder == "plugins":
            own = module.rpartition(".")[0]
            leaf = target.split(".")
            is_private_sibling = target.startswith(own + ".") and any(p.startswith("_") for p in leaf[len(own.split(".")):])
            is_package = target in ("cuda_agent.plugins", own) or target.count(".") <= 2
            if target != module and not is_private_sibling and not is_package:
                problems.append(f"{rel}:{line}: plugin {module} imports plugin {target}")
    return problems


def imports(path: Path, module: str, top_level_only: bool = False):
    """(imported module, line) pairs; ``top_level_only`` skips function bodies and TYPE_CHECKING blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]

    def visit(node, top):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and top_level_only:
                continue
            if isinstance(child, ast.If) and top_level_only and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)] if child.level > 1 else base
                    target = ".".join([*base, child.module] if child.module else base)
                else:
                    target = child.module or ""
                yield target, child.lineno
                for alias in child.names:  # 'from cuda_agent.plugins import tools' imports a submodule
                    yield f"{target}.{alias.name}", child.lineno
            yield from visit(child, top)

    yield from visit(tree, True)


def test_dependency_rules():
    problems = []
    pkgs = packages()
    for folder, path in sources():
        module = module_name(path)
        rel = str(path.relative_to(ROOT))
        problems += layering_problems(folder, rel, module, path.read_text(encoding="utf-8"), list(imports(path, module)), pkgs)
    assert not problems, "dependency rules broken:\n" + "\n".join(problems)


def test_known_private_imports_only_shrink():
    """Every listed exception still exists (a fixed one must leave the list, so the list only shrinks)."""
    def still_imported(rel: str, target: str) -> bool:
        path = ROOT / rel
        return path.exists() and any(t == target or t.startswith(target + ".") for t, _ in imports(path, module_name(path)))

    stale = [f"{rel}: {target}" for rel, target in sorted(KNOWN_PRIVATE_IMPORTS) if not still_imported(rel, target)]
    assert not stale, "remove fixed entries from KNOWN_PRIVATE_IMPORTS: " + ", ".join(stale)


PLANTED = {
    "import_module": 'import importlib\nrestore = importlib.import_module("cuda_agent.harness.workspace").ConfinedWorkspace\n',
    "f-string": 'from importlib import import_module\nmod = import_module(f"cuda_agent.training.{name}")\n',
    "table": 'COMMANDS = {"train": "cuda_agent.training.cli"}\n',
    "dunder": 'x = __import__("cuda_agent.skills")\n',
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_a_planted_string_import_in_core_fails(kind):
    problems = layering_problems("core", "core/planted.py", "cuda_agent.planted", PLANTED[kind], [], packages())
    assert problems and all("imports by string" in p for p in problems), problems


def test_a_planted_private_import_fails_and_a_docstring_does_not():
    source = '"""Uses ``cuda_agent.harness.tasks`` in prose only."""\nfrom cuda_agent.harness._bwrap import resolve_isolation\n'
    static = [("cuda_agent.harness._bwrap", 2), ("cuda_agent.harness._bwrap.resolve_isolation", 2)]
    problems = layering_problems("plugins", "plugins/tools/planted.py", "cuda_agent.plugins.tools.planted", source,
                                 static, packages())
    assert problems and all("a private part of cuda_agent.harness" in p for p in problems), problems
    assert not layering_problems("core", "core/planted.py", "cuda_agent.planted", '"""See ``cuda_agent.harness``."""\n',
                                 [], packages())


def test_no_import_cycles():
    graph: dict[str, set[str]] = {}
    known = set()
    for _, path in sources():
        known.add(module_name(path))
    for _, path in sources():
        module = module_name(path)
        deps = set()
        for target, _ in imports(path, module, top_level_only=True):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                deps.add(target)
        graph[module] = deps
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def dfs(node):
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join([*stack[stack.index(dep):], dep]))
            elif dep not in state:
                dfs(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_interfaces_document_every_field():
    from cuda_agent.protocols import FilterVerdict, Generation, SamplingParams, ToolOutput
    from cuda_agent.schemas import (Baselines, BuildInfo, CandidateResult, CheckError, Diagnostics, EndRecord,
                                    FreshSetsInfo, HeaderRecord, InputDomain, InputSetsInfo, MemoryInfo, Message,
                                    PolicyOutput, PrecisionContract, Provenance, SanitizerInfo, SpinCalibration,
                                    StartPhase, TaskManifest, TensorSpec, Timing, ToolCall, ToolSchema, TurnRecord,
                                    TurnTokens, WidenedInfo)
    from cuda_agent.schemas.trajectory import Observation

    doc = (ROOT / "docs" / "interfaces.md").read_text()
    missing = []
    for model in (TaskManifest, TensorSpec, InputDomain, PrecisionContract, CandidateResult, CheckError, Timing, Baselines,
                  Provenance, Diagnostics, SpinCalibration, StartPhase, BuildInfo, InputSetsInfo, FreshSetsInfo,
                  MemoryInfo, WidenedInfo, SanitizerInfo, HeaderRecord, TurnRecord, TurnTokens, Observation, EndRecord, ToolCall, ToolSchema, Message,
                  PolicyOutput, ToolOutput, SamplingParams, Generation, FilterVerdict):
        section = re.search(rf"#### {model.__name__}\n(.*?)(?=\n#|\Z)", doc, re.S)
        if section is None:
            missing.append(f"{model.__name__}: no '#### {model.__name__}' table")
            continue
        missing += [f"{model.__name__}.{f}" for f in model.model_fields if f"`{f}`" not in section.group(1)]
    assert not missing, "docs/interfaces.md lacks: " + ", ".join(missing)
    for name in ("INTERFACES_VERSION", "HOOKSPEC_VERSION", "Tokenization contract", "Backend protocol", "Rollout engine",
                 "Spec grammar", "Version policy"):
        assert name in doc
