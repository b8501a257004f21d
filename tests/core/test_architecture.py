"""Dependency rules of DESIGN.md, checked by an AST walk of the tree, and the docs of the interfaces.

- core/ imports no other folder statically (it loads them by dotted name);
- harness/ and training/ never import plugins/; harness/ never imports training/;
- plugins/ never import another (public) plugin module;
- no import cycles among module-level imports.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

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
    for folder, path in sources():
        module = module_name(path)
        for target, line in imports(path, module):
            target_folder = folder_of(target)
            if target_folder is None:
                continue
            if target_folder not in ALLOWED[folder]:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {folder}/ imports {target} ({target_folder}/)")
            if folder == "plugins" and target_folder == "plugins":
                own = module.rpartition(".")[0]
                leaf = target.split(".")
                is_private_sibling = target.startswith(own + ".") and any(p.startswith("_") for p in leaf[len(own.split(".")):])
                is_package = target in ("cuda_agent.plugins", own) or target.count(".") <= 2
                if target != module and not is_private_sibling and not is_package:
                    problems.append(f"{path.relative_to(ROOT)}:{line}: plugin {module} imports plugin {target}")
    assert not problems, "dependency rules broken:\n" + "\n".join(problems)


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
    from cuda_agent.schemas import (Baselines, CandidateResult, CheckError, EndRecord, HeaderRecord, InputDomain, Message,
                                    PolicyOutput, PrecisionContract, Provenance, TaskManifest, TensorSpec, Timing,
                                    ToolCall, ToolSchema, TurnRecord, TurnTokens)
    from cuda_agent.schemas.trajectory import Observation

    doc = (ROOT / "docs" / "interfaces.md").read_text()
    missing = []
    for model in (TaskManifest, TensorSpec, InputDomain, PrecisionContract, CandidateResult, CheckError, Timing, Baselines,
                  Provenance, HeaderRecord, TurnRecord, TurnTokens, Observation, EndRecord, ToolCall, ToolSchema, Message,
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
