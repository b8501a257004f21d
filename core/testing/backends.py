"""Conformance checks for backend authors: the backend, its device adapter, its skill (docs/backends.md).

Run them in your own CI (``examples/triton-backend/tests`` does, on a CPU machine with Triton's interpreter)::

    from cuda_agent.testing import check_backend, check_skill

    def test_backend_conforms(task, honest, cheats):
        backend = MyBackend()
        check_skill(backend)                      # its SKILL.md is registered for it
        check_backend(backend, task, solution=honest, evaluate=True, cheats=cheats)

Each raises :class:`~cuda_agent.testing.ConformanceError` listing every problem found.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cuda_agent.protocols import Backend, Workspace
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.testing.conformance import ConformanceError, _fail_if

#: Device kinds the harness runs candidates on (cuda_agent.harness.device_adapter.DEVICE_KINDS; core does not
#: import the harness, so the kit states them too and a test keeps both equal).
DEVICE_KINDS: tuple[str, ...] = ("cpu", "cuda")
#: Attributes and methods of a device adapter (cuda_agent.harness.device_adapter.DeviceAdapter).
ADAPTER_ATTRIBUTES: tuple[str, ...] = ("name", "skill", "kernel_suffix", "device_kind", "language")
ADAPTER_METHODS: tuple[str, ...] = ("availability", "device_facts", "task_for", "layout", "build", "check_sources",
                                   "check_binary", "check_single_file", "kernel_names")
LOADER_METHODS: tuple[str, ...] = ("prepare", "load", "kernel_origin_violations")
#: Characters a skill document may have (it is in every system prompt).
SKILL_MAX_CHARS = 24_000
_FAILING = (Status.compile_error, Status.rejected, Status.error, Status.timeout)


def check_adapter(adapter: Any) -> None:
    """A device adapter has the protocol's attributes and methods, a valid device kind, and a runner loader that
    imports (as the sandboxed runner will import it) with ``prepare``, ``load`` and ``kernel_origin_violations``."""
    problems: list[str] = []
    for attr in ADAPTER_ATTRIBUTES:
        if not isinstance(getattr(adapter, attr, None), str) or not getattr(adapter, attr):
            problems.append(f"attribute {attr!r} must be a non-empty string")
    if getattr(adapter, "device_kind", None) not in DEVICE_KINDS:
        problems.append(f"device_kind {getattr(adapter, 'device_kind', None)!r}: valid kinds are {', '.join(DEVICE_KINDS)}")
    for method in ADAPTER_METHODS:
        if not callable(getattr(adapter, method, None)):
            problems.append(f"method {method}() is missing")
    spec = getattr(adapter, "runner_loader", "(missing)")
    if spec is not None:
        problems += _loader_problems(spec)
    _fail_if(problems, f"device adapter {getattr(adapter, 'name', type(adapter).__name__)!r}")


def _loader_problems(spec: Any) -> list[str]:
    if not isinstance(spec, str) or spec.count(":") != 1:
        return [f"runner_loader must be 'module:Class' or None, got {spec!r}"]
    module, attr = spec.split(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        return [f"runner_loader {spec!r} does not import: {exc} (the sandboxed runner imports it from the installed "
                "package)"]
    try:
        loader = cls()
    except Exception as exc:  # noqa: BLE001 - reported
        return [f"runner_loader {spec!r} cannot be made with no arguments: {type(exc).__name__}: {exc}"]
    return [f"runner_loader {spec!r} has no {m}()" for m in LOADER_METHODS if not callable(getattr(loader, m, None))]


def check_skill(backend: Any, plugin_manager: Any = None) -> str:
    """The backend's skill is registered for it (``register(..., backend=<its name>)``), is Markdown with a title,
    and fits the prompt budget (:data:`SKILL_MAX_CHARS`). Returns the text.

    :param plugin_manager: the manager to look in (default: a fresh one loading installed plugins).
    """
    if plugin_manager is None:
        from cuda_agent.plugin_manager import PluginManager

        plugin_manager = PluginManager()
    name, skill = str(getattr(backend, "name", "?")), str(getattr(backend, "skill", "?"))
    problems = list(plugin_manager.skill_problems(name, skill))
    _fail_if(problems, f"skill of backend {name!r}")
    entry = plugin_manager.registry.get("skill", skill)
    if entry.backend is None:
        problems.append(f"skill {skill!r} is registered for no backend: register it with backend={name!r}")
    try:
        text = plugin_manager.skill_text(skill)
    except Exception as exc:  # noqa: BLE001 - reported
        _fail_if([f"reading skill {skill!r} raised {type(exc).__name__}: {exc}"], f"skill of backend {name!r}")
    if not text.strip():
        problems.append(f"skill {skill!r} is empty")
    elif not text.lstrip().startswith("#"):
        problems.append(f"skill {skill!r} must start with a Markdown title ('# ...')")
    if len(text) > SKILL_MAX_CHARS:
        problems.append(f"skill {skill!r} has {len(text)} characters; keep it under {SKILL_MAX_CHARS} (it is in every "
                        "system prompt)")
    _fail_if(problems, f"skill of backend {name!r}")
    return text


def check_backend(backend: Any, task: TaskManifest, solution: Mapping[str, str] | None = None,
                  root: Path | None = None, *, evaluate: bool = False,
                  cheats: Mapping[str, Mapping[str, str]] | None = None,
                  plugin_manager: Any = None) -> CandidateResult | None:
    """A backend reports availability, lays out a workspace, and compiles an honest solution; with ``evaluate``
    its ``verify`` passes the honest solution and fails every cheat.

    :param solution: relative path -> content of an honest solution; compiled when the backend is available.
    :param root: where to lay out the workspace (default: a temp folder).
    :param evaluate: also ``verify`` the honest solution (must be correct) and each of ``cheats`` (must not be).
    :param cheats: name -> files of a dishonest solution of ``task`` (a fixture per threat class).
    :param plugin_manager: where the backend's skill is looked up (default: a fresh one loading installed plugins).
    :returns: the honest solution's last result (verify's with ``evaluate``), when one ran.
    """
    problems: list[str] = []
    for attr in ("name", "skill", "kernel_suffix"):
        if not isinstance(getattr(backend, attr, None), str):
            problems.append(f"attribute {attr!r} must be a string")
    if not isinstance(backend, Backend):
        problems.append("does not implement cuda_agent.protocols.Backend (availability, device_facts, "
                        "prepare_workspace, compile, verify, profile, grade, close)")
    _fail_if(problems, "backend")
    if getattr(backend, "adapter", None) is not None:
        check_adapter(backend.adapter)
    available = backend.availability()
    if not (isinstance(available, tuple) and len(available) == 2 and isinstance(available[0], bool)
            and isinstance(available[1], str)):
        _fail_if([f"availability() must return (bool, reason), got {available!r}"], f"backend {backend.name!r}")
    from cuda_agent.errors import ConfigError
    from cuda_agent.plugin_manager import PluginManager

    try:
        (plugin_manager or PluginManager()).skill_text(backend.skill)
    except ConfigError as exc:
        problems.append(f"skill {backend.skill!r} is not a registered skill document (register_skills): {exc}")
    if not isinstance(backend.device_facts(), dict):
        problems.append("device_facts() must return a dict")
    result = None
    try:
        with tempfile.TemporaryDirectory(prefix="cuda-agent-backend-") as tmp:
            ws = _layout_checks(backend, task, Path(root) if root is not None else Path(tmp) / "workspace",
                                Path(tmp), problems)
            if solution is not None and available[0] and ws is not None:
                result = _honest_checks(backend, ws, task, solution, evaluate, problems)
                if evaluate and cheats:
                    _cheat_checks(backend, task, cheats, Path(tmp), problems)
    finally:
        backend.close()
    _fail_if(problems, f"backend {backend.name!r}")
    return result


def _layout_checks(backend: Any, task: TaskManifest, ws_root: Path, tmp: Path, problems: list[str]) -> Any:
    ws = backend.prepare_workspace(task, ws_root)
    files = ws.list()
    if "model.py" not in files:
        problems.append(f"prepare_workspace did not create model.py (files: {files})")
    elif not ws.is_protected("model.py"):
        problems.append("model.py must be protected")
    if ws.verify_protected():
        problems.append(f"protected files changed right after layout: {ws.verify_protected()}")
    if not isinstance(ws, Workspace):
        problems.append("prepare_workspace must return a cuda_agent.protocols.Workspace (root, store, read, write, "
                        "list, is_protected, snapshot, restore, verify_protected)")
        return None
    snapshot = str(ws.snapshot())
    if not snapshot.startswith("sha256:"):
        problems.append("workspace.snapshot() must return 'sha256:...'")
    else:
        restored = type(ws).restore(snapshot, ws.store, tmp / "restored")
        if restored.list() != files:
            problems.append(f"restore(snapshot) gave files {restored.list()}, the workspace had {files}")
    return ws


def _write(ws: Any, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        ws.write(rel, text)


def _honest_checks(backend: Any, ws: Any, task: TaskManifest, solution: Mapping[str, str], evaluate: bool,
                   problems: list[str]) -> CandidateResult | None:
    _write(ws, solution)
    result = backend.compile(ws, task)
    if not isinstance(result, CandidateResult) or result.phase != "compile":
        problems.append(f"compile() must return a CandidateResult with phase 'compile', got {result!r:.200}")
        return None
    if result.status in _FAILING:
        problems.append(f"compile of the honest solution failed: {result.status.value} {result.rule or ''} "
                        f"{result.message[:500]}")
        return result
    if not evaluate:
        return result
    verified = backend.verify(ws, task)
    if not isinstance(verified, CandidateResult) or verified.phase != "verify":
        problems.append(f"verify() must return a CandidateResult with phase 'verify', got {verified!r:.200}")
    elif verified.status is not Status.correct:
        problems.append(f"verify of the honest solution: {verified.status.value} {verified.rule or ''} "
                        f"{verified.message[:500]}")
    return verified


def _cheat_checks(backend: Any, task: TaskManifest, cheats: Mapping[str, Mapping[str, str]], tmp: Path,
                  problems: list[str]) -> None:
    for name, files in cheats.items():
        ws = backend.prepare_workspace(task, tmp / f"cheat-{name}")
        _write(ws, files)
        compiled = backend.compile(ws, task)
        result = compiled if compiled.status in _FAILING else backend.verify(ws, task)
        if result.status is Status.correct:
            problems.append(f"cheat {name!r} passed verify: a backend must reject it (rejected/incorrect/error)")


__all__ = ["ADAPTER_ATTRIBUTES", "ADAPTER_METHODS", "ConformanceError", "DEVICE_KINDS", "SKILL_MAX_CHARS",
           "check_adapter", "check_backend", "check_skill"]
