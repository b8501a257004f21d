"""The code in docs/ runs: every ```python block of docs/*.md and README.md, and every fence names its language.

A page's python blocks run in order in one namespace (in a temporary folder); the hooks they define are
registered with a plugin manager (so a documented plugin really loads), and their argument-free ``test_*``
functions are called (so a documented conformance test really passes). Fragments are fenced
```` ```python illustrative ```` and are only compiled; shell, YAML, TOML and layout listings name their language.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


def fenced_blocks(text: str) -> list[tuple[int, str, str]]:
    """(line, info string, code) of every fenced block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or m.group(2).strip().startswith("`"):
            i += 1
            continue
        fence, info, start, body = m.group(1), m.group(2).strip(), i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        blocks.append((start, info, "\n".join(body) + "\n"))
        i += 1
    return blocks


def python_blocks(page: Path) -> list[tuple[int, str, str]]:
    return [b for b in fenced_blocks(page.read_text(encoding="utf-8")) if b[1].split()[:1] == ["python"]]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_fence_names_its_language(page):
    bare = [line for line, info, _ in fenced_blocks(page.read_text(encoding="utf-8")) if not info]
    assert not bare, f"{page.name}: fenced blocks at lines {bare} name no language (python, bash, yaml, toml, text)"


RUNNABLE = [p for p in PAGES if any("illustrative" not in info for _, info, _ in python_blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    from cuda_agent.plugin_manager import PluginManager

    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for line, info, code in python_blocks(page):
        if "illustrative" in info:
            continue
        exec(compile(code, f"{page.name}:{line}", "exec"), namespace)  # noqa: S102 - the documentation's own examples
    hooks = {k: v for k, v in namespace.items() if callable(v) and hasattr(v, "cuda_agent_impl")}
    if hooks:
        pm = PluginManager(load_entrypoints=False, extra_plugins=[(f"docs.{page.stem}", types.SimpleNamespace(**hooks))])
        components = next(p.components for p in pm.plugins() if p.name == f"docs.{page.stem}")
        assert components, f"{page.name}: its hooks registered nothing"
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v) and v.__code__.co_argcount == 0]
    for test in tests:
        test()


def test_the_plugin_page_runs_a_plugin_a_tool_and_their_conformance_checks():
    blocks = python_blocks(ROOT / "docs" / "plugins.md")
    runnable = "".join(code for _, info, code in blocks if "illustrative" not in info)
    assert "register_rewards" in runnable and "register_tools" in runnable and "def test_tool" in runnable
    assert "from cuda_agent.protocols import ToolContext, ToolOutput" in runnable
